package dsse

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
	ssdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
)

const pt = "application/vnd.in-toto+json"

func TestPAE(t *testing.T) {
	// The example from the DSSE protocol document.
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
	if got := string(PAE("", nil)); got != "DSSEv1 0  0 " {
		t.Fatalf("PAE of empties = %q", got)
	}
}

// TestSigstoreInterop checks that an envelope from sigstore's dsse.WrapSigner parses and
// verifies here, which also proves our PAE equals the one sigstore signs.
func TestSigstoreInterop(t *testing.T) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := signature.LoadSigner(priv, crypto.SHA256)
	v, _ := signature.LoadVerifier(priv.Public(), crypto.SHA256)
	payload := []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)
	raw, err := ssdsse.WrapSigner(s, pt).SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	env, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if env.PayloadType != pt || !bytes.Equal(env.Payload, payload) || len(env.Signatures) != 1 {
		t.Fatalf("parsed %+v", env)
	}
	if got := env.Verify([]signature.Verifier{v}); len(got) != 1 {
		t.Fatal("sigstore's envelope does not verify here")
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ov, _ := signature.LoadVerifier(other.Public(), crypto.SHA256)
	if got := env.Verify([]signature.Verifier{ov, v}); len(got) != 1 || got[0] != 1 {
		t.Fatalf("Verify with [other, right] = %v, want [1]", got)
	}
	// And sigstore's own verifier agrees.
	if err := ssdsse.WrapVerifier(v, ssdsse.WithExpectedPayloadType(pt)).VerifySignature(bytes.NewReader(raw), nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseRefusals(t *testing.T) {
	p := base64.StdEncoding.EncodeToString([]byte("{}"))
	sig := base64.StdEncoding.EncodeToString([]byte("sig"))
	ok := `{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"keyid":"k","sig":"` + sig + `"}]}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("valid envelope refused: %v", err)
	}
	cases := map[string]struct {
		in   string
		code string
	}{
		"empty":              {"", CodeEmpty},
		"spaces":             {"   \n", CodeEmpty},
		"truncated":          {ok[:len(ok)-3], CodeTruncated},
		"truncated in value": {ok[:20], CodeTruncated},
		"garbage":            {"hello", CodeNotJSON},
		"binary":             {"\xff\xfe", CodeNotJSON},
		"array":              {`[]`, CodeMalformed},
		"string":             {`"x"`, CodeMalformed},
		"trailing data":      {ok + ` {}`, CodeNotJSON},
		"duplicate key":      {`{"payloadType":"` + pt + `","payloadType":"x","payload":"` + p + `","signatures":[{"sig":"` + sig + `"}]}`, CodeMalformed},
		"case-folded key":    {`{"PayloadType":"` + pt + `","payload":"` + p + `","signatures":[{"sig":"` + sig + `"}]}`, CodeMalformed},
		"unknown key":        {strings.Replace(ok, `"payload":`, `"extra":1,"payload":`, 1), CodeMalformed},
		"no payload":         {`{"payloadType":"` + pt + `","signatures":[{"sig":"` + sig + `"}]}`, CodeMalformed},
		"empty payloadType":  {strings.Replace(ok, pt, "", 1), CodeMalformed},
		"number payloadType": {strings.Replace(ok, `"`+pt+`"`, `7`, 1), CodeMalformed},
		"no signatures":      {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[]}`, CodeMalformed},
		"signatures object":  {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":{}}`, CodeMalformed},
		"signature no sig":   {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"keyid":"k"}]}`, CodeMalformed},
		"signature null sig": {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"sig":null}]}`, CodeMalformed},
		"signature extra":    {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"sig":"` + sig + `","cert":"x"}]}`, CodeMalformed},
		"duplicate sig key":  {`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"sig":"` + sig + `","sig":"` + sig + `"}]}`, CodeMalformed},
		"payload not b64":    {strings.Replace(ok, p, "!!!!", 1), CodeBase64},
		"sig not b64":        {strings.Replace(ok, sig, "*", 1), CodeBase64},
		"non-canonical b64":  {strings.Replace(ok, p, "e30=", 1) + "", ""}, // canonical: control
		"padding bits set":   {strings.Replace(ok, p, "e31=", 1), CodeBase64},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want a *dsse.Error with code %s", err, c.code)
			}
			if e.Code != c.code {
				t.Fatalf("code %s (%s), want %s", e.Code, e.Msg, c.code)
			}
		})
	}
	many := `{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[` +
		strings.TrimSuffix(strings.Repeat(`{"sig":"`+sig+`"},`, MaxSignatures+1), ",") + `]}`
	if _, err := Parse([]byte(many)); err == nil || err.(*Error).Code != CodeMalformed {
		t.Fatalf("%d signatures: %v", MaxSignatures+1, err)
	}
	big := make([]byte, MaxEnvelopeSize+1)
	if _, err := Parse(big); err == nil || err.(*Error).Code != CodeTooLarge {
		t.Fatalf("oversized envelope: %v", err)
	}
}

// FuzzParse: Parse never panics, and whatever it accepts has the shape it promises.
func FuzzParse(f *testing.F) {
	p := base64.StdEncoding.EncodeToString([]byte(`{"_type":"https://in-toto.io/Statement/v1"}`))
	f.Add([]byte(`{"payloadType":"` + pt + `","payload":"` + p + `","signatures":[{"keyid":"","sig":"AAAA"}]}`))
	f.Add([]byte(`{"payloadType":"x","payload":"","signatures":[]}`))
	f.Add([]byte(`{"payloadType":"x","payload":"e30","signatures":[{"sig":"_-8"}]}`))
	f.Add([]byte(`{`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := Parse(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		if env.PayloadType == "" || len(env.Signatures) == 0 {
			t.Fatalf("accepted an envelope without type or signatures: %q", raw)
		}
		for _, s := range env.Signatures {
			if len(s.Sig) == 0 {
				t.Fatalf("accepted an empty signature: %q", raw)
			}
		}
	})
}
