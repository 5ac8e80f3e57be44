package keyed

import "context"

// keyCtx is the context WithKey returns. Its Value gives the keyCtx itself
// for ctxKey, so that KeyFrom reads the key without boxing a string.
type keyCtx struct {
	context.Context
	key string
	h   uint64 // hashKey(key), for Group.For
}

type ctxKey struct{}

func (c *keyCtx) Value(k any) any {
	if k == (ctxKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// WithKey returns a copy of ctx carrying key: the groups of a call made
// with it use the members of key. The empty key means the default member.
//
// It hashes key once, for every group the call uses (Group.For).
func WithKey(ctx context.Context, key string) context.Context {
	c := &keyCtx{Context: ctx, key: key}
	if key != "" {
		c.h = hashKey(key)
	}
	return c
}

// KeyFrom returns the key WithKey put in ctx (the innermost one), or ""
// when there is none. It does not allocate.
func KeyFrom(ctx context.Context) string {
	key, _ := Lookup(ctx)
	return key
}

// Lookup returns the key WithKey put in ctx and true, or "" and false when
// ctx carries none. A nil ctx carries none.
func Lookup(ctx context.Context) (key string, ok bool) {
	if c := keyOf(ctx); c != nil {
		return c.key, true
	}
	return "", false
}

// keyOf returns the innermost keyCtx of ctx, or nil.
func keyOf(ctx context.Context) *keyCtx {
	if ctx == nil {
		return nil
	}
	if c, is := ctx.(*keyCtx); is { // the common case: no chain to walk
		return c
	}
	c, _ := ctx.Value(ctxKey{}).(*keyCtx)
	return c
}
