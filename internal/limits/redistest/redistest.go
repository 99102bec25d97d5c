// Package redistest gives tests a Redis of their own: the server is FENCEGATE_TEST_REDIS
// (default redis://127.0.0.1:6379/0), and each test writes under a key prefix of its own,
// deleted at its end. When the server is unreachable the test is skipped, except with
// CI=true, where it must be up. It is test support only.
package redistest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the test server used when FENCEGATE_TEST_REDIS is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL returns the test server's URL, skipping the test when it does not answer (failing
// it under CI).
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("FENCEGATE_TEST_REDIS")
	if u == "" {
		u = DefaultURL
	}
	c := client(t, u)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis unreachable at FENCEGATE_TEST_REDIS: %v", err)
		}
		t.Skipf("redis unreachable (set FENCEGATE_TEST_REDIS): %v", err)
	}
	return u
}

func client(t testing.TB, u string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	opt.Protocol = 2
	opt.DisableIdentity = true
	return redis.NewClient(opt)
}

var seq atomic.Int64

// Prefix returns a key prefix no other test uses, and deletes every key under it when the
// test ends.
func Prefix(t testing.TB, u string) string {
	t.Helper()
	p := fmt.Sprintf("fencegate-test:%d:%d:%d:", os.Getpid(), time.Now().UnixNano(), seq.Add(1))
	t.Cleanup(func() {
		c := client(t, u)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, p+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("redis: delete %s*: %v", p, err)
		}
	})
	return p
}
