package provenance

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"

	"github.com/sigstore/sigstore/pkg/signature"
	ssdsse "github.com/sigstore/sigstore/pkg/signature/dsse"

	"github.com/foundry-build/foundry/provenance/dsse"
)

// Sign wraps st in a DSSE envelope (payloadType PayloadType) signed by signer and returns
// the envelope bytes. Those bytes are the attestation: store them unchanged and address
// them by EnvelopeDigest. Sign checks its own output with the signer's public key before
// returning it, so a broken signer cannot produce an envelope that will never verify.
func Sign(signer *Signer, st *Statement) ([]byte, error) {
	if signer == nil || signer.s == nil {
		return nil, errors.New("sign: no signer")
	}
	if st == nil || st.st == nil {
		return nil, errors.New("sign: no statement (mint one with NewProvenance, NewTestResult or NewVerificationSummary)")
	}
	payload, err := st.marshal()
	if err != nil {
		return nil, fmt.Errorf("sign: encoding statement: %w", err)
	}
	env, err := ssdsse.WrapSigner(signer.s, PayloadType).SignMessage(bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	parsed, err := dsse.Parse(env)
	if err != nil {
		return nil, fmt.Errorf("sign: produced an envelope that does not parse: %w", err)
	}
	v, err := signature.LoadVerifier(signer.pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if len(parsed.Verify([]signature.Verifier{v})) != 1 || !bytes.Equal(parsed.Payload, payload) {
		return nil, errors.New("sign: produced an envelope that does not verify with the signer's own key")
	}
	return env, nil
}
