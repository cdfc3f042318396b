package workload

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/resp"
)

// startRedis starts a throw-away redis-server on a free loopback port (no persistence), or
// skips the test when redis-server is not installed.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := resp.Dial(context.Background(), addr, time.Second)
		if err == nil {
			_, err = c.Do("PING")
			_ = c.Close()
			if err == nil {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server not answering: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsumeScriptOutcomes checks that the Redis consume has the oracle's semantics.
func TestConsumeScriptOutcomes(t *testing.T) {
	c, err := resp.Dial(context.Background(), startRedis(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sha, err := c.Do("SCRIPT", "LOAD", ConsumeScript)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.Do("SET", "nonce:a", "acme", "NX", "PX", redisNonceTTL); err != nil || v.Str != "OK" {
		t.Fatalf("issue: %+v %v", v, err)
	}
	if v, err := c.Do("SET", "nonce:a", "acme", "NX", "PX", redisNonceTTL); err != nil || !v.Null {
		t.Fatalf("second issue of the same nonce: %+v %v, want null (NX)", v, err)
	}
	consume := func(key, org, rid string) error {
		v, err := c.Do("EVALSHA", sha.Str, "1", key, org, rid)
		if err == nil && v.Int != 1 {
			t.Fatalf("consume answered %+v", v)
		}
		return err
	}
	wantErr := func(err error, code string) {
		t.Helper()
		var se *resp.ServerError
		if !errors.As(err, &se) || !strings.HasPrefix(se.Msg, code+" ") {
			t.Fatalf("err %v, want %s", err, code)
		}
	}
	wantErr(consume("nonce:never", "acme", "r1"), "UNKNOWN_NONCE")
	wantErr(consume("nonce:a", "other", "r1"), "ORG_MISMATCH")
	if err := consume("nonce:a", "acme", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := consume("nonce:a", "acme", "r1"); err != nil {
		t.Fatalf("replay with the same request id: %v, want success", err)
	}
	wantErr(consume("nonce:a", "acme", "r2"), "NONCE_USED")
	if v, err := c.Do("PTTL", "nonce:a"); err != nil || v.Int <= 0 {
		t.Fatalf("PTTL after consume %+v %v: the expiry must be kept", v, err)
	}
}

// TestRedisOracleOps runs the workload's operation against Redis.
func TestRedisOracleOps(t *testing.T) {
	addr := startRedis(t)
	c, err := resp.Dial(context.Background(), addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sha, err := c.Do("SCRIPT", "LOAD", ConsumeScript)
	if err != nil {
		t.Fatal(err)
	}
	ops, closeAll := RedisOracleOps(addr, sha.Str, 2, 5*time.Second)
	defer closeAll()
	for range 10 {
		for _, op := range ops {
			if err := op(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v, err := c.Do("DBSIZE"); err != nil || v.Int != 20 {
		t.Fatalf("DBSIZE %+v %v, want 20 nonces", v, err)
	}
}
