package rediscore

import "context"

// Subscribe implements locker.Locker: the key's channel is subscribed on one of the Backend's
// shared pub/sub connections to the key's node (see WithNoticeConns), for as long as the key has
// waiters.
func (b *Backend) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if b.opts.err != nil {
		return nil, nil, b.opts.err
	}
	ch, cancel, err := b.notices.subscribe(ctx, Channel(key))
	if err != nil {
		return nil, nil, b.fail(ctx, "subscribe", err)
	}
	return ch, cancel, nil
}

// SubscribeAs implements locker.Granter: Subscribe for a waiter of key whose owner token is
// owner, which receives "" for a notice that grants nothing, the request ID of the grant for a
// grant to owner, and nothing for a grant to another owner.
func (b *Backend) SubscribeAs(ctx context.Context, key, owner string) (<-chan string, func(), error) {
	if b.opts.err != nil {
		return nil, nil, b.opts.err
	}
	ch, cancel, err := b.notices.subscribeAs(ctx, Channel(key), key, owner)
	if err != nil {
		return nil, nil, b.fail(ctx, "subscribe", err)
	}
	return ch, cancel, nil
}
