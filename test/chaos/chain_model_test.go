package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func TestChainModel(t *testing.T) {
	appendOf := func(content string) Input { return Input{Op: OpAppend, Key: "e/1", Content: content} }
	read := Input{Op: OpVersion, Key: "e/1"}
	answer := func(status int, content string, seq int64) Output {
		return Output{Status: status, Content: content, Seq: seq}
	}
	conflict := Output{Status: 409, Code: "event_conflict"}
	missing := Output{Status: 404, Code: "unknown_version"}
	for _, c := range []modelCase{
		{"created once, repeated, conflicting body refused, seq kept", ChainModel, hist(
			op(0, 0, 10, read, missing),
			op(0, 11, 20, appendOf("a"), answer(201, "a", 0)),
			op(0, 21, 30, appendOf("a"), answer(200, "a", 3)),
			op(1, 31, 40, appendOf("b"), conflict),
			op(1, 41, 50, read, answer(200, "a", 3)),
		), true},
		{"an unknown append that took effect", ChainModel, hist(
			op(0, 0, -1, appendOf("a"), unknown),
			op(1, 20, 30, appendOf("a"), answer(200, "a", 0)),
		), true},
		{"created twice", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, appendOf("a"), answer(201, "a", 0)),
		), false},
		{"an acknowledged version lost", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, read, missing),
		), false},
		{"the seq of a version moved", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, read, answer(200, "a", 4)),
			op(1, 21, 30, read, answer(200, "a", 5)),
		), false},
		{"a signed version shown unsigned again", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, read, answer(200, "a", 4)),
			op(1, 21, 30, read, answer(200, "a", 0)),
		), false},
		{"a conflicting body accepted", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, appendOf("b"), answer(200, "a", 0)),
		), false},
		{"the other body shown", ChainModel, hist(
			op(0, 0, 10, appendOf("a"), answer(201, "a", 0)),
			op(1, 11, 20, read, answer(200, "b", 0)),
		), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.model, c.history, 10*time.Second, "", nil)
			if got := res.Result == porcupine.Ok; got != c.legal {
				t.Errorf("linearizable = %v (%s), want %v", got, res.Result, c.legal)
			}
		})
	}
}
