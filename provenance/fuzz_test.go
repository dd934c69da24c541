package provenance

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// FuzzVerifyEnvelope feeds mutated envelopes to Verify. Whatever the bytes, it must not
// panic, and if it accepts them the verified payload must be exactly the one that was
// signed: re-encodings (base64 alphabet, JSON whitespace) may pass, changed content may not.
func FuzzVerifyEnvelope(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := NewSigner(priv)
	if err != nil {
		f.Fatal(err)
	}
	key, err := NewVerifier("fuzz.pub", priv.Public())
	if err != nil {
		f.Fatal(err)
	}
	digest := sha("artifact")
	st, err := NewProvenance(testExecution(digest))
	if err != nil {
		f.Fatal(err)
	}
	signed, err := st.MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	env, err := Sign(signer, st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(env[:len(env)/3])
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		rep, err := Verify(context.Background(), Options{
			Keys:         []*Verifier{key},
			Attestations: []Attestation{{Source: "fuzz", Envelope: raw}},
		}, Subject{Name: "a", Digest: digest})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK {
			return
		}
		e, err := dsse.Parse(raw)
		if err != nil {
			t.Fatalf("verified bytes that do not parse: %v", err)
		}
		if e.PayloadType != PayloadType || !bytes.Equal(e.Payload, signed) {
			t.Fatalf("verified a payload that was never signed: %q", e.Payload)
		}
	})
}

// FuzzParseStatement: ParseStatement never panics and returns only valid v1 statements.
func FuzzParseStatement(f *testing.F) {
	st, err := NewProvenance(testExecution(sha("x")))
	if err != nil {
		f.Fatal(err)
	}
	b, _ := st.MarshalJSON()
	f.Add(b)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"00"}}],"predicateType":"x","predicate":{}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v0.1"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		st, err := ParseStatement(payload)
		if err != nil {
			return
		}
		if st.GetType() != intoto.StatementTypeUri || st.Validate() != nil {
			t.Fatalf("accepted an invalid statement: %q", payload)
		}
		if st.GetPredicateType() == PredicateSLSAProvenance {
			_, _ = ParseProvenance(st) // must not panic
		}
	})
}
