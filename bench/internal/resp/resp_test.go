package resp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
)

// fakeServer reads one command from its end of a pipe, reports its raw bytes, and writes
// reply. It stops when the pipe closes.
func fakeServer(t *testing.T, replies []string) (*Conn, <-chan string) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	got := make(chan string, len(replies))
	go func() {
		r := bufio.NewReader(server)
		for _, reply := range replies {
			raw, err := readCommand(r)
			if err != nil {
				return
			}
			got <- raw
			if _, err := io.WriteString(server, reply); err != nil {
				return
			}
		}
	}()
	return NewConn(client, 0), got
}

// readCommand reads one array of bulk strings and returns its exact bytes.
func readCommand(r *bufio.Reader) (string, error) {
	var sb strings.Builder
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	sb.WriteString(head)
	var n int
	if _, err := fmt.Sscanf(head, "*%d\r\n", &n); err != nil {
		return "", err
	}
	for range n {
		l, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		sb.WriteString(l)
		var size int
		if _, err := fmt.Sscanf(l, "$%d\r\n", &size); err != nil {
			return "", err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		sb.Write(buf)
	}
	return sb.String(), nil
}

func TestCommandEncoding(t *testing.T) {
	c, got := fakeServer(t, []string{"+OK\r\n"})
	if _, err := c.Do("SET", "nonce:a", "org 1", "NX", "PX", "3600000", ""); err != nil {
		t.Fatal(err)
	}
	want := "*7\r\n$3\r\nSET\r\n$7\r\nnonce:a\r\n$5\r\norg 1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$7\r\n3600000\r\n$0\r\n\r\n"
	if raw := <-got; raw != want {
		t.Fatalf("sent %q, want %q", raw, want)
	}
}

func TestReplies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reply   string
		want    Value
		wantErr string // a *ServerError message
	}{
		{"simple", "+OK\r\n", Value{Kind: SimpleString, Str: "OK"}, ""},
		{"error", "-ERR unknown command\r\n", Value{}, "ERR unknown command"},
		{"integer", ":-42\r\n", Value{Kind: Integer, Int: -42}, ""},
		{"bulk", "$5\r\na\r\nbc\r\n", Value{Kind: BulkString, Str: "a\r\nbc"}, ""},
		{"empty bulk", "$0\r\n\r\n", Value{Kind: BulkString}, ""},
		{"null bulk", "$-1\r\n", Value{Kind: BulkString, Null: true}, ""},
		{"null array", "*-1\r\n", Value{Kind: Array, Null: true}, ""},
		{"nested array", "*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n$-1\r\n", Value{Kind: Array, Elems: []Value{
			{Kind: Integer, Int: 1},
			{Kind: Array, Elems: []Value{{Kind: SimpleString, Str: "a"}, {Kind: BulkString, Str: "b"}}},
			{Kind: BulkString, Null: true},
		}}, ""},
		{"error inside array", "*2\r\n-nonce_used\r\n:1\r\n", Value{}, "nonce_used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A second command after each reply proves the stream stayed in step.
			c, _ := fakeServer(t, []string{tc.reply, "+PONG\r\n"})
			v, err := c.Do("X")
			if tc.wantErr != "" {
				var se *ServerError
				if !errors.As(err, &se) || se.Msg != tc.wantErr {
					t.Fatalf("err %v, want server error %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v, tc.want) {
				t.Fatalf("got %+v, want %+v", v, tc.want)
			}
			if v, err := c.Do("PING"); err != nil || v.Str != "PONG" {
				t.Fatalf("next command: %+v, %v", v, err)
			}
		})
	}
}

func TestMalformedReplies(t *testing.T) {
	for _, reply := range []string{"?x\r\n", ":abc\r\n", "$-2\r\n", "$3\r\nabcd\r\n", "+OK\n", "*x\r\n"} {
		c, _ := fakeServer(t, []string{reply})
		_, err := c.Do("X")
		var se *ServerError
		if err == nil || errors.As(err, &se) {
			t.Errorf("reply %q: err %v, want a protocol error", reply, err)
		}
	}
}
