package rediscore

import "errors"

// Element is what ArrayReply reads of an element of an array reply of the rueidis family
// (*rueidis.RedisMessage, *valkey.ValkeyMessage).
type Element[M any] interface {
	*M
	IsInt64() bool
	AsInt64() (int64, error)
	IsString() bool
	ToString() (string, error)
}

// ArrayReply converts the elements of a script's array reply of the rueidis family, as
// DecodedReply converts its ToAny, without ToAny's allocations: a grant's reply costs none,
// another array one. (The adapter reads the message itself: a message passed here by address
// would be moved to the heap.)
func ArrayReply[M any, P Element[M]](elems []M) (Reply, error) {
	if len(elems) == 2 && P(&elems[0]).IsInt64() && P(&elems[1]).IsInt64() {
		h, _ := P(&elems[0]).AsInt64()
		t, _ := P(&elems[1]).AsInt64()
		if h >= 1 && h <= int64(len(grants)) && t == 0 {
			return Reply{Array: grants[h-1][:]}, nil
		}
	}
	r := Reply{Array: make([]int64, 0, len(elems))}
	for i := range elems {
		e := P(&elems[i])
		switch {
		case e.IsInt64():
			v, _ := e.AsInt64()
			r.Array = append(r.Array, v)
		case e.IsString():
			r.Text, _ = e.ToString()
		default:
			return Reply{}, errors.New("unexpected script reply element (neither an integer nor a string)")
		}
	}
	return r, nil
}
