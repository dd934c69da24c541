package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	segjson "github.com/segmentio/encoding/json"

	"github.com/foundry-build/foundry/provenance"
)

// Scopes of foundry mcp's bearer tokens: what a host may do (spec/mcp.md §6).
const (
	scopeRead    = "read"     // the read-only project tools and the job tools that read
	scopeApply   = "apply"    // the apply tool (served only with -allow apply)
	scopeCall    = "call:"    // + a capability's name, or *: call that capability's tool
	scopePropose = "propose:" // + a job's id, or *: send a proposal to that job
)

// tokenAlgorithms are the JWS algorithms a token may be signed with: those of the keys
// foundry keygen makes. "none" and HMAC are never accepted.
var tokenAlgorithms = []string{"ES256", "EdDSA"}

// tokenClaims are a token's claims: the registered ones and the scopes, space-separated as
// in OAuth (RFC 9068's scope claim).
type tokenClaims struct {
	jwt.RegisteredClaims
	Scope string `json:"scope,omitempty"`
}

// mcpAuth is the authorization of foundry mcp -http as an OAuth 2.1 resource server (MCP
// 2025-11-25): the issuers whose tokens it accepts and the resource URI tokens must name as
// their audience. A token is checked on every request; it is never passed on to a tool, a
// step, a capability call or a log.
type mcpAuth struct {
	issuers  map[string][]crypto.PublicKey // the trusted issuers' keys, by issuer
	order    []string                      // the issuers, in the order they were given
	resource string                        // the audience tokens must name
	metadata string                        // the URL of the protected resource metadata
}

// parseTokenIssuers reads the -token-issuer values, ISSUER=PUBLIC-KEY-PEM (repeatable: an
// issuer may have several keys). No value: no authorization (nil).
func parseTokenIssuers(values []string) (*mcpAuth, error) {
	if len(values) == 0 {
		return nil, nil
	}
	a := &mcpAuth{issuers: map[string][]crypto.PublicKey{}}
	for _, v := range values {
		iss, file, ok := strings.Cut(v, "=")
		if !ok || iss == "" || file == "" {
			return nil, fmt.Errorf("-token-issuer %q: want ISSUER=PUBLIC-KEY-PEM", v)
		}
		keys, err := provenance.LoadVerifiers(file)
		if err != nil {
			return nil, fmt.Errorf("-token-issuer %s: %v", iss, err)
		}
		if _, seen := a.issuers[iss]; !seen {
			a.order = append(a.order, iss)
		}
		for _, k := range keys {
			a.issuers[iss] = append(a.issuers[iss], k.PublicKey())
		}
	}
	return a, nil
}

// protect registers the protected resource metadata (RFC 9728) on mux, at the well-known
// URI and at its form with the resource's path, and returns next behind the bearer token
// check: a request without a valid token is 401 with WWW-Authenticate: Bearer
// resource_metadata="…".
func (a *mcpAuth) protect(mux *http.ServeMux, resource string, next http.Handler) (http.Handler, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("-resource %q: %v", resource, err)
	}
	a.resource = resource
	a.metadata = u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + u.Path
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		ResourceName:           "Foundry",
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        []string{scopeRead, scopeApply, scopeCall + "*", scopePropose + "*"},
		// Issuers that are URLs are authorization servers a host can discover; an operator's
		// own issuer (foundry mcp token) is a name and has no endpoints.
		AuthorizationServers: slices.DeleteFunc(slices.Clone(a.order), func(iss string) bool { return !strings.HasPrefix(iss, "https://") }),
	}
	h := auth.ProtectedResourceMetadataHandler(md)
	mux.Handle("/.well-known/oauth-protected-resource", h)
	if u.Path != "" && u.Path != "/" {
		mux.Handle("/.well-known/oauth-protected-resource"+u.Path, h)
	}
	bearer := auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: a.metadata})
	return bearer(next), nil
}

// verify checks a bearer token: a JWS signed with ES256 or EdDSA by a key of its issuer,
// which must be a trusted one, for this server's resource (aud), not expired (exp is
// required) and already valid (nbf, iat). Its errors never quote the token.
func (a *mcpAuth) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		iss, _ := t.Claims.GetIssuer()
		keys, ok := a.issuers[iss]
		if !ok {
			return nil, fmt.Errorf("issuer %q is not trusted", short(iss, mcpMaxEcho))
		}
		set := jwt.VerificationKeySet{}
		for _, k := range keys {
			set.Keys = append(set.Keys, k)
		}
		return set, nil
	}, jwt.WithValidMethods(tokenAlgorithms), jwt.WithAudience(a.resource), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		return nil, fmt.Errorf("%w: %v (get a new token from the operator: foundry mcp token)", auth.ErrInvalidToken, err)
	}
	return &auth.TokenInfo{
		Scopes:     strings.Fields(claims.Scope),
		Expiration: claims.ExpiresAt.Time,
		// go-sdk binds a session to the user that opened it: a session id is refused with
		// another issuer's or subject's token.
		UserID: claims.Issuer + " " + claims.Subject,
	}, nil
}

// requiredScope is the scope a JSON-RPC message needs, "" for none beyond a valid token
// (initialize, ping, tools/list, notifications), and the message's id. It reads the message
// as go-sdk will: its own decoder for the message, and for the call's params the JSON
// library and mode go-sdk's internal decoder uses (segmentio, field names matched exactly),
// so that a body cannot name one tool to this check and another to the SDK (encoding/json
// would take "NAME" for "name", the SDK does not).
func requiredScope(body []byte) (scope string, id json.RawMessage) {
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || req.Method != "tools/call" {
		return "", nil
	}
	id = requestID(body)
	var params struct {
		Name      string `json:"name"`
		Arguments struct {
			Job json.RawMessage `json:"job"`
		} `json:"arguments"`
	}
	dec := segjson.NewDecoder(bytes.NewReader(req.Params))
	dec.DontMatchCaseInsensitiveStructFields()
	if dec.Decode(&params) != nil {
		return scopeRead, id // go-sdk refuses the params; a refusal still needs a token that reads
	}
	name := params.Name
	switch {
	case name == "apply":
		return scopeApply, id
	case name == "propose":
		var job string
		if segjson.Unmarshal(params.Arguments.Job, &job) != nil {
			job = "" // go-sdk's validation refuses it; it still needs a propose scope
		}
		return scopePropose + job, id
	case strings.HasPrefix(name, capToolPrefix):
		return scopeCall + strings.TrimPrefix(name, capToolPrefix), id
	}
	// Every other project tool reads (spec/mcp.md §2): a tool that changes anything must
	// have a scope of its own above. A name that is no tool needs read too.
	return scopeRead, id
}

// granted says whether the scopes include want: itself, or its kind's wildcard (call:*,
// propose:*).
func granted(scopes []string, want string) bool {
	if slices.Contains(scopes, want) {
		return true
	}
	for _, kind := range []string{scopeCall, scopePropose} {
		if strings.HasPrefix(want, kind) && slices.Contains(scopes, kind+"*") {
			return true
		}
	}
	return false
}

// allowed checks that the request's token grants the scope its message needs. If not, it
// answers 403 with WWW-Authenticate: Bearer error="insufficient_scope", scope="…" and a
// JSON-RPC error for the message's id; nothing runs.
func (a *mcpAuth) allowed(w http.ResponseWriter, r *http.Request, body []byte) bool {
	want, id := requiredScope(body)
	if want == "" {
		return true
	}
	ti := auth.TokenInfoFromContext(r.Context())
	if ti != nil && granted(ti.Scopes, want) {
		return true
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer error=\"insufficient_scope\", scope=%q, resource_metadata=%q, error_description=%q",
		short(want, mcpMaxEcho), a.metadata, "the token does not grant this call"))
	writeRPCError(w, http.StatusForbidden, id, fmt.Sprintf("insufficient_scope: this call needs the scope %q, which the token does not grant (ask the operator for a token with it)", short(want, mcpMaxEcho)))
	return false
}

// mintToken makes a token: a JWT signed by key (ES256 for ECDSA P-256, EdDSA for Ed25519)
// with the claims iss, sub, aud, iat, nbf, exp, jti and scope.
func mintToken(key crypto.Signer, issuer, subject, audience string, scopes []string, ttl time.Duration, now time.Time) (string, error) {
	var method jwt.SigningMethod
	switch key.(type) {
	case *ecdsa.PrivateKey:
		method = jwt.SigningMethodES256
	case ed25519.PrivateKey:
		method = jwt.SigningMethodEdDSA
	default:
		return "", fmt.Errorf("unsupported key type %T (want ECDSA P-256 or Ed25519, as foundry keygen makes)", key)
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	claims := tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuer, Subject: subject, Audience: jwt.ClaimStrings{audience},
			IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)), ID: hex.EncodeToString(jti),
		},
		Scope: strings.Join(scopes, " "),
	}
	t := jwt.NewWithClaims(method, claims)
	if id, err := provenance.KeyID(key.Public()); err == nil {
		t.Header["kid"] = id
	}
	return t.SignedString(key)
}

// checkScopes refuses a scope that is not one of the list.
func checkScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("-scope: give at least one scope (read, apply, call:NAME, call:*, propose:JOB, propose:*)")
	}
	for _, s := range scopes {
		switch {
		case s == scopeRead, s == scopeApply:
		case strings.HasPrefix(s, scopeCall) && len(s) > len(scopeCall):
		case strings.HasPrefix(s, scopePropose) && len(s) > len(scopePropose):
		default:
			return fmt.Errorf("-scope %q: unknown; the scopes are read, apply, call:NAME, call:*, propose:JOB, propose:*", s)
		}
	}
	return nil
}
