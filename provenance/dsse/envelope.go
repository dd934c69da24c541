// Package dsse parses and checks DSSE envelopes (https://github.com/secure-systems-lab/dsse)
// strictly, for Foundry's verifier.
//
// It exists beside sigstore's pkg/signature/dsse (which Foundry uses to sign) because a
// verifier must refuse what a lenient json.Unmarshal accepts: duplicate or differently-cased
// keys, trailing data, wrong types, oversized input. Every refusal carries a Code so that
// reports and tests can say precisely why an envelope was rejected.
//
// This package never decides trust on its own: Verify says which of the given keys produced a
// valid signature over PAE(payloadType, payload); the keyid field is a hint and is ignored, as
// the DSSE protocol requires.
package dsse

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sigstore/sigstore/pkg/signature"
)

// MaxEnvelopeSize bounds the bytes Parse accepts. A step's provenance lists every input by
// digest, so it can be large, but nothing Foundry writes comes near this; anything bigger is
// refused before it is decoded.
const MaxEnvelopeSize = 8 << 20

// MaxSignatures bounds the signatures in one envelope. Each is tried against every trusted
// key, so an envelope stuffed with signatures would otherwise cost keys×signatures
// verifications; real envelopes carry one or a few.
const MaxSignatures = 64

// Refusal codes carried by *Error.
const (
	CodeEmpty     = "envelope-empty"     // no bytes, or only whitespace
	CodeTooLarge  = "envelope-too-large" // more than MaxEnvelopeSize bytes
	CodeTruncated = "envelope-truncated" // the JSON ends before the envelope does
	CodeNotJSON   = "envelope-not-json"  // not a JSON document at all
	CodeMalformed = "envelope-malformed" // JSON, but not a DSSE envelope
	CodeBase64    = "envelope-base64"    // payload or sig is not standard or URL-safe base64
)

// Error is a refused envelope: Code is one of the Code* constants, Msg says where and why.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Code + ": " + e.Msg }

func refuse(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Envelope is a parsed DSSE envelope with payload and signatures already base64-decoded.
type Envelope struct {
	PayloadType string
	Payload     []byte
	Signatures  []Signature
}

// Signature is one entry of the envelope's signatures list.
type Signature struct {
	// KeyID is the unauthenticated hint from the envelope. Never use it to decide trust.
	KeyID string
	Sig   []byte
}

// Parse decodes raw as a DSSE envelope and refuses anything that is not exactly one:
// the top level must be an object with the keys payloadType (string), payload (base64
// string) and signatures (non-empty array of objects with sig (base64 string) and optional
// keyid (string)); keys are case-sensitive, may not repeat, and no other keys are allowed;
// nothing may follow the object. Base64 may be standard or URL-safe, padded or not (DSSE
// lets signers choose), but must be canonical.
func Parse(raw []byte) (*Envelope, error) {
	if len(raw) > MaxEnvelopeSize {
		return nil, refuse(CodeTooLarge, "%d bytes, limit %d", len(raw), MaxEnvelopeSize)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, refuse(CodeEmpty, "no envelope bytes")
	}
	if !utf8.Valid(raw) {
		return nil, refuse(CodeNotJSON, "not UTF-8 text")
	}
	if !json.Valid(raw) {
		return nil, classifyInvalid(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	fields, err := readObject(dec, "envelope")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, refuse(CodeMalformed, "data after the envelope object")
	}
	for k := range fields {
		switch k {
		case "payloadType", "payload", "signatures":
		default:
			return nil, refuse(CodeMalformed, "unknown envelope field %q", k)
		}
	}
	env := &Envelope{}
	if env.PayloadType, err = stringField(fields, "payloadType", "envelope", true); err != nil {
		return nil, err
	}
	payload, err := stringField(fields, "payload", "envelope", true)
	if err != nil {
		return nil, err
	}
	if env.Payload, err = DecodeBase64(payload); err != nil {
		return nil, refuse(CodeBase64, "payload: %v", err)
	}
	sigsRaw, ok := fields["signatures"]
	if !ok {
		return nil, refuse(CodeMalformed, "envelope has no signatures field")
	}
	sdec := json.NewDecoder(bytes.NewReader(sigsRaw))
	sdec.UseNumber()
	if tok, err := sdec.Token(); err != nil || tok != json.Delim('[') {
		return nil, refuse(CodeMalformed, "signatures is not an array")
	}
	for i := 0; sdec.More(); i++ {
		if i == MaxSignatures {
			return nil, refuse(CodeMalformed, "more than %d signatures", MaxSignatures)
		}
		where := "signatures[" + strconv.Itoa(i) + "]"
		sf, err := readObject(sdec, where)
		if err != nil {
			return nil, err
		}
		for k := range sf {
			if k != "sig" && k != "keyid" {
				return nil, refuse(CodeMalformed, "unknown field %q in %s", k, where)
			}
		}
		var s Signature
		if s.KeyID, err = stringField(sf, "keyid", where, false); err != nil {
			return nil, err
		}
		sig, err := stringField(sf, "sig", where, true)
		if err != nil {
			return nil, err
		}
		if s.Sig, err = DecodeBase64(sig); err != nil {
			return nil, refuse(CodeBase64, "%s.sig: %v", where, err)
		}
		if len(s.Sig) == 0 {
			return nil, refuse(CodeMalformed, "%s.sig is empty", where)
		}
		env.Signatures = append(env.Signatures, s)
	}
	if len(env.Signatures) == 0 {
		return nil, refuse(CodeMalformed, "envelope has no signatures")
	}
	return env, nil
}

// classifyInvalid tells a truncated envelope (valid JSON that stops early) from garbage, so
// that a half-written or cut-off file is reported as such.
func classifyInvalid(raw []byte) *Error {
	var v any
	err := json.Unmarshal(raw, &v)
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &syn) && syn.Offset >= int64(len(raw))):
		return refuse(CodeTruncated, "JSON ends after %d bytes, before the envelope is complete", len(raw))
	case errors.As(err, &syn):
		return refuse(CodeNotJSON, "invalid JSON at byte %d: %v", syn.Offset, err)
	default:
		return refuse(CodeNotJSON, "invalid JSON: %v", err)
	}
}

// readObject reads one JSON object from dec and returns its members undecoded, refusing
// duplicate keys (encoding/json would silently keep the last one).
func readObject(dec *json.Decoder, where string) (map[string]json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, refuse(CodeMalformed, "%s is not a JSON object", where)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, refuse(CodeMalformed, "%s: %v", where, err)
		}
		k, _ := kt.(string)
		if _, dup := out[k]; dup {
			return nil, refuse(CodeMalformed, "duplicate key %q in %s", k, where)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, refuse(CodeMalformed, "%s.%s: %v", where, k, err)
		}
		out[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, refuse(CodeMalformed, "%s: %v", where, err)
	}
	return out, nil
}

func stringField(m map[string]json.RawMessage, key, where string, required bool) (string, error) {
	raw, ok := m[key]
	if !ok {
		if required {
			return "", refuse(CodeMalformed, "%s has no %s field", where, key)
		}
		return "", nil
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", refuse(CodeMalformed, "%s.%s is not a string", where, key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", refuse(CodeMalformed, "%s.%s: %v", where, key, err)
	}
	if required && s == "" {
		return "", refuse(CodeMalformed, "%s.%s is empty", where, key)
	}
	return s, nil
}

// encodings are the base64 alphabets DSSE allows, tried in order. Strict() refuses
// non-zero padding bits, so each byte string has exactly one accepted spelling per alphabet.
var encodings = []*base64.Encoding{
	base64.StdEncoding.Strict(),
	base64.URLEncoding.Strict(),
	base64.RawStdEncoding.Strict(),
	base64.RawURLEncoding.Strict(),
}

// DecodeBase64 decodes s as standard or URL-safe base64, with or without padding.
func DecodeBase64(s string) ([]byte, error) {
	for _, enc := range encodings {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not standard or URL-safe base64")
}

// PAE is DSSE's pre-authentication encoding, the bytes a signature actually covers:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// Verify returns the indexes (into keys) of every key that produced at least one valid
// signature in e over PAE(e.PayloadType, e.Payload). Signatures are tried against every key
// regardless of keyid: keyid is unauthenticated, and trusting it could only turn a valid
// signature into a refused one.
func (e *Envelope) Verify(keys []signature.Verifier) []int {
	pae := PAE(e.PayloadType, e.Payload)
	var ok []int
	for i, k := range keys {
		for _, s := range e.Signatures {
			if k.VerifySignature(bytes.NewReader(s.Sig), bytes.NewReader(pae)) == nil {
				ok = append(ok, i)
				break
			}
		}
	}
	return ok
}
