package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/foundry-build/foundry/provenance"
)

func init() {
	register(&command{
		name:    "keygen",
		summary: "Create the key pair that signs provenance",
		usage:   "foundry keygen [-type ecdsa-p256|ed25519] [-out PREFIX] [-force] [-json]",
		help: `
Keygen creates a signing key pair for Foundry's attestations and writes two files:

  PREFIX.key  the private key, PKCS#8 PEM, mode 0600. Foundry signs with it when the
              FOUNDRY_SIGNING_KEY environment variable (or a command's key flag) names it.
              Never put it, or its path, in a recipe: recipe files must not name keys.
  PREFIX.pub  the public key, PKIX PEM. Give it to auditors: it is all that
              'foundry verify -key' and 'cosign verify-blob-attestation --key' need.

ecdsa-p256 (the default) is what cosign generates and verifies everywhere; ed25519 gives
smaller, deterministic signatures. Existing files are never overwritten unless -force is
given. The key is not encrypted: protect the file, not a passphrase.

Examples:
  foundry keygen                          # foundry.key, foundry.pub
  foundry keygen -out keys/ci -type ed25519
  foundry keygen -out keys/ci -force -json   # {"privateKey": ..., "publicKey": ..., "keyId": ...}

Exit codes: 0 keys written, 1 could not write them (e.g. they exist), 2 usage error.`,
		setup: func(fs *flag.FlagSet) func(*cliEnv, []string) int {
			keyType := fs.String("type", provenance.KeyECDSAP256, "key type: ecdsa-p256 or ed25519")
			out := fs.String("out", "foundry", "write PREFIX.key and PREFIX.pub")
			force := fs.Bool("force", false, "overwrite existing key files")
			jsonOut := fs.Bool("json", false, "print the paths and key id as JSON")
			return func(env *cliEnv, args []string) int {
				if len(args) != 0 {
					fmt.Fprintf(env.stderr, "foundry keygen: unexpected argument %q\nRun 'foundry keygen -help' for usage.\n", args[0])
					return exitUsage
				}
				if *out == "" {
					fmt.Fprintln(env.stderr, "foundry keygen: -out is empty")
					return exitUsage
				}
				switch *keyType {
				case provenance.KeyECDSAP256, provenance.KeyEd25519:
				default:
					fmt.Fprintf(env.stderr, "foundry keygen: -type %q: want %s or %s\n", *keyType, provenance.KeyECDSAP256, provenance.KeyEd25519)
					return exitUsage
				}
				priv, pub, err := provenance.GenerateKey(*keyType)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry keygen: %v\n", err)
					return exitInternal
				}
				privPath, pubPath := *out+".key", *out+".pub"
				if !*force {
					for _, p := range []string{privPath, pubPath} {
						if _, err := os.Lstat(p); err == nil {
							fmt.Fprintf(env.stderr, "foundry keygen: %s already exists; refusing to overwrite a key (use -force to replace it)\n", p)
							return exitError
						}
					}
				}
				// The private key first: a public key without its private key is harmless,
				// the reverse loses the ability to verify.
				if err := writeKeyFile(privPath, priv, 0o600, *force); err != nil {
					fmt.Fprintf(env.stderr, "foundry keygen: %v\n", err)
					return exitError
				}
				if err := writeKeyFile(pubPath, pub, 0o644, *force); err != nil {
					fmt.Fprintf(env.stderr, "foundry keygen: %v\n", err)
					return exitError
				}
				s, err := provenance.LoadSigner(privPath)
				if err != nil {
					fmt.Fprintf(env.stderr, "foundry keygen: reading back the new key: %v\n", err)
					return exitInternal
				}
				if *jsonOut {
					writeJSON(env.stdout, map[string]string{"privateKey": privPath, "publicKey": pubPath, "keyId": s.KeyID(), "type": *keyType})
					return exitOK
				}
				fmt.Fprintf(env.stdout, "Wrote %s (private, keep secret) and %s (public).\nKey id: %s\n", privPath, pubPath, s.KeyID())
				return exitOK
			}
		},
	})
}

// writeKeyFile writes data to path with mode perm. Without force it uses O_EXCL so that a
// file created since the existence check is not clobbered. With force it replaces the file
// through a temporary and a rename, so the old key is never half-overwritten, and the mode
// is the new one even if the old file was more permissive.
func writeKeyFile(path string, data []byte, perm fs.FileMode, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists; refusing to overwrite a key (use -force to replace it)", path)
			}
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return f.Close()
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}
