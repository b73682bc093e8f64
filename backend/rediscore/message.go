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
// DecodedReply converts its ToAny, with one allocation (the Array) instead of ToAny's. (The
// adapter reads the message itself: a message passed here by address would be moved to the
// heap.)
func ArrayReply[M any, P Element[M]](elems []M) (Reply, error) {
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
