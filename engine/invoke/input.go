package invoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/foundry-build/foundry/digest"
	"github.com/foundry-build/foundry/engine/verdict"
)

// MaxInputValues bounds the JSON values of a call's input (every array, object, string,
// number and literal in it). Decoding a value and validating it against a schema costs a
// few hundred bytes of memory and about a microsecond for each value it holds, so the
// bound is what keeps a call's cost in proportion to a small input: a 16 MiB body of
// small numbers holds eight million of them.
const MaxInputValues = 1 << 18

// Input is a call's input once CheckInput has accepted it: the bytes the capability reads
// on stdin.
type Input struct{ stdin []byte }

// InputValues counts the JSON values of input, reading at most up to the value past
// MaxInputValues. It returns an *InputError when input is not JSON as a call takes it,
// or holds more values than MaxInputValues (TooLarge), without decoding anything: a caller
// can bound what checking input will cost before paying it.
func InputValues(input []byte) (int, error) {
	n, err := digest.CheckCount(input, MaxInputValues)
	if err != nil {
		return n, &InputError{Reason: notJSON("input", err)}
	}
	if n > MaxInputValues {
		return n, &InputError{Reason: fmt.Sprintf("the input holds more than %d JSON values, the most a call takes", MaxInputValues), TooLarge: true}
	}
	return n, nil
}

// CheckInput checks a call's input as Call does before anything runs: it must be JSON
// (strictly: digest.Check), hold at most MaxInputValues values, and be valid under
// c.InputSchema, else an *InputError says why. The Input it returns is the JSON as
// written, insignificant whitespace removed.
func CheckInput(c Capability, input []byte) (Input, error) {
	if _, err := InputValues(input); err != nil {
		return Input{}, err
	}
	if err := check(c.InputSchema, input, "input"); err != nil {
		return Input{}, &InputError{Reason: err.Error()}
	}
	var stdin bytes.Buffer
	json.Compact(&stdin, input) // valid: checked above
	stdin.WriteByte('\n')       // as a case's input is fed (spec/capability-cases.md §3)
	return Input{stdin: stdin.Bytes()}, nil
}

// check parses b strictly (numbers kept exact) and validates it against schema, if any.
func check(schema json.RawMessage, b []byte, what string) error {
	v, err := verdict.DecodeJSON(b)
	if err != nil {
		return errors.New(notJSON(what, err))
	}
	if len(schema) == 0 {
		return nil
	}
	if err := verdict.Validate(string(schema), v); err != nil {
		return fmt.Errorf("the %s violates the %s schema: %v", what, what, err)
	}
	return nil
}

// notJSON says why b is not JSON in the terms of a caller, who sent bytes: where in them,
// and what was wrong there (not which function of Foundry's refused them).
func notJSON(what string, err error) string {
	var se *digest.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("the %s is not JSON: at byte %d: %s", what, se.Offset, se.Msg)
	}
	return fmt.Sprintf("the %s is not JSON: %v", what, err)
}

// JSON is the input as the capability reads it, without the final newline.
func (in Input) JSON() json.RawMessage { return bytes.TrimSuffix(in.stdin, []byte("\n")) }
