package provenance

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"
)

// SigningKeyEnv names the environment variable that may hold the path of the private key.
// Keys come from a flag or this variable, never from recipe files: recipes may be written
// by people or models the operator does not trust, and a key they could name is a key they
// could get mounted into a step.
const SigningKeyEnv = "FOUNDRY_SIGNING_KEY"

// SigningKeyPath picks the private key's path: the command-line flag's value if given, else
// $FOUNDRY_SIGNING_KEY. getenv is os.Getenv, or a stand-in in tests. Pass the result to
// LoadSigner, which explains what to do when it is empty. There is deliberately no variant
// that takes a value from configuration files.
func SigningKeyPath(flagValue string, getenv func(string) string) string {
	if flagValue != "" {
		return flagValue
	}
	if getenv == nil {
		return ""
	}
	return getenv(SigningKeyEnv)
}

// Key types accepted by GenerateKey.
const (
	KeyECDSAP256 = "ecdsa-p256" // the default: what cosign generates and verifies everywhere
	KeyEd25519   = "ed25519"
)

// GenerateKey creates a key pair of the given type and returns the private key as PKCS#8
// PEM ("PRIVATE KEY", unencrypted: protect it with file permissions) and the public key as
// PKIX PEM ("PUBLIC KEY"), the form cosign's --key accepts.
func GenerateKey(keyType string) (privPEM, pubPEM []byte, err error) {
	var priv crypto.Signer
	switch keyType {
	case KeyECDSAP256, "":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyEd25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q (want %s or %s)", keyType, KeyECDSAP256, KeyEd25519)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generating %s key: %w", keyType, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}

// KeyID is "sha256:" + hex of the SHA-256 of the public key's PKIX DER encoding. It names a
// key in reports; it is never read from an envelope to decide trust.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Signer signs statements. Get one from LoadSigner or NewSigner.
type Signer struct {
	s     signature.Signer
	pub   crypto.PublicKey
	keyID string
}

// KeyID names the signer's public key (see KeyID).
func (s *Signer) KeyID() string { return s.keyID }

// PublicKey is the signer's public key.
func (s *Signer) PublicKey() crypto.PublicKey { return s.pub }

// Verifier returns the signer's public key as a trusted key named name: what admission
// passes as Admission.Keys when the same project key signed the inputs.
func (s *Signer) Verifier(name string) (*Verifier, error) { return NewVerifier(name, s.pub) }

// NewSigner wraps an in-memory ECDSA P-256 or Ed25519 private key.
func NewSigner(priv crypto.Signer) (*Signer, error) {
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s: only P-256 is supported", k.Curve.Params().Name)
		}
	case ed25519.PrivateKey:
	default:
		return nil, fmt.Errorf("unsupported private key type %T (want ECDSA P-256 or Ed25519)", priv)
	}
	// SHA-256 for ECDSA; ignored for pure Ed25519, which is what cosign verifies DSSE with.
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading signer: %w", err)
	}
	id, err := KeyID(priv.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{s: s, pub: priv.Public(), keyID: id}, nil
}

// LoadSigner reads a PKCS#8 PEM private key written by GenerateKey (foundry keygen). The
// file must not be readable by group or others: a signing key anyone on the machine can read
// signs anything anyone wants.
func LoadSigner(path string) (*Signer, error) {
	if path == "" {
		return nil, fmt.Errorf("no signing key: pass a key path or set %s", SigningKeyEnv)
	}
	cs, err := LoadPrivateKey(path)
	if err != nil {
		return nil, err
	}
	s, err := NewSigner(cs)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return s, nil
}

// LoadPrivateKey reads a PKCS#8 PEM private key file as LoadSigner does, with the same
// checks (a regular file, readable by its owner only, one "PRIVATE KEY" block), for a signer
// of something other than statements (foundry mcp token's JWTs).
func LoadPrivateKey(path string) (crypto.Signer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("signing key %s: not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s: mode %04o lets others read it; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	block, rest := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("signing key %s: no PEM block", path)
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("signing key %s: PEM type %q, want \"PRIVATE KEY\" (PKCS#8, as written by foundry keygen)", path, block.Type)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("signing key %s: data after the PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	cs, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("signing key %s: unsupported key type %T", path, k)
	}
	return cs, nil
}

// Verifier is one trusted public key.
type Verifier struct {
	// Name says where the key came from (its file path), for reports.
	Name string
	// KeyID names the key (see KeyID).
	KeyID string
	v     signature.Verifier
	pub   crypto.PublicKey
}

// PublicKey is the trusted key itself (*ecdsa.PublicKey or ed25519.PublicKey), for a
// verifier of something other than DSSE envelopes (foundry mcp's bearer tokens).
func (v *Verifier) PublicKey() crypto.PublicKey { return v.pub }

// NewVerifier wraps an ECDSA P-256 or Ed25519 public key; name labels it in reports.
func NewVerifier(name string, pub crypto.PublicKey) (*Verifier, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s: only P-256 is supported", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported public key type %T (want ECDSA P-256 or Ed25519)", pub)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("loading verifier: %w", err)
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Verifier{Name: name, KeyID: id, v: v, pub: pub}, nil
}

// LoadVerifiers reads PKIX PEM public keys ("PUBLIC KEY", as written by foundry keygen or
// cosign generate-key-pair). A file may hold several PEM blocks; each becomes a Verifier.
func LoadVerifiers(paths ...string) ([]*Verifier, error) {
	if len(paths) == 0 {
		return nil, errors.New("no public keys given")
	}
	var out []*Verifier
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		n := 0
		for {
			var block *pem.Block
			block, b = pem.Decode(b)
			if block == nil {
				break
			}
			n++
			if block.Type != "PUBLIC KEY" {
				return nil, fmt.Errorf("public key %s: PEM block %d has type %q, want \"PUBLIC KEY\"", p, n, block.Type)
			}
			pub, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("public key %s: block %d: %w", p, n, err)
			}
			v, err := NewVerifier(filepath.Clean(p), pub)
			if err != nil {
				return nil, fmt.Errorf("public key %s: %w", p, err)
			}
			out = append(out, v)
		}
		if n == 0 {
			return nil, fmt.Errorf("public key %s: no PEM block", p)
		}
		if len(bytes.TrimSpace(b)) != 0 {
			return nil, fmt.Errorf("public key %s: data after the last PEM block", p)
		}
	}
	return out, nil
}
