package rediscore

import (
	"errors"
)

// Message is what MessageReply reads of a reply message of the rueidis family
// (*rueidis.RedisMessage, *valkey.ValkeyMessage).
type Message[M any] interface {
	*M
	IsInt64() bool
	AsInt64() (int64, error)
	IsArray() bool
	ToArray() ([]M, error)
	IsString() bool
	ToString() (string, error)
}

// MessageReply converts a script reply message m, with the error of its result (ToMessage's:
// a Lua error, a nil reply, or the driver's), as DecodedReply converts its ToAny, without ToAny's
// allocations: a grant's reply costs none, another array one.
func MessageReply[M any, P Message[M]](m M, err error) (Reply, error) {
	if err != nil {
		return Reply{}, err
	}
	msg := P(&m)
	switch {
	case msg.IsInt64():
		v, err := msg.AsInt64()
		return Reply{Int: v}, err
	case msg.IsArray():
		elems, err := msg.ToArray()
		if err != nil {
			return Reply{}, err
		}
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
	return Reply{}, errors.New("unexpected script reply (neither an integer nor an array)")
}
