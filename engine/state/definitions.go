package state

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// Definition is the canonical action definition (RFC 8785 JSON) a node address last ran
// or was satisfied with, kept so `foundry explain` can say which field changed.
type Definition struct {
	Address string
	Action  digest.Digest // the action digest the node had with this definition
	JSON    []byte
	Updated time.Time
}

// RecordDefinition stores the definition a node address completed with (done or cached),
// replacing the previous one. canonical must be a JSON object (the engine passes the exact
// canonical bytes it hashed; this package does not re-serialise them).
func (d *DB) RecordDefinition(ctx context.Context, address string, action digest.Digest, canonical []byte) error {
	defs := []Definition{{Address: address, Action: action, JSON: canonical}}
	return d.tx(ctx, "record definition of "+address, func(tx *sql.Tx) error {
		return recordDefinitions(ctx, tx, defs)
	})
}

// checkDefinitions refuses a definition that is not a JSON object.
func checkDefinitions(defs []Definition) error {
	for _, df := range defs {
		if !json.Valid(df.JSON) || !bytes.HasPrefix(bytes.TrimSpace(df.JSON), []byte("{")) {
			return fmt.Errorf("state: definition of %s (%s) is not a JSON object", df.Address, df.Action)
		}
	}
	return nil
}

// recordDefinitions stores definitions whose action changed, after checking them. A no-op
// apply of 10,000 steps otherwise validated and rewrote 10,000 identical definitions: one
// query for the recorded actions is much cheaper.
func recordDefinitions(ctx context.Context, tx *sql.Tx, defs []Definition) error {
	if len(defs) == 0 {
		return nil
	}
	defs, err := changedDefinitions(ctx, tx, defs)
	if err != nil {
		return err
	}
	if err := checkDefinitions(defs); err != nil {
		return err
	}
	now := nanos(time.Now())
	stmt, err := tx.PrepareContext(ctx, `
INSERT INTO definitions (address, action_digest, definition, updated) VALUES (?, ?, ?, ?)
ON CONFLICT (address) DO UPDATE SET action_digest = excluded.action_digest, definition = excluded.definition, updated = excluded.updated`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, df := range defs {
		if _, err := stmt.ExecContext(ctx, df.Address, string(df.Action), df.JSON, now); err != nil {
			return err
		}
	}
	return nil
}

// changedDefinitions returns the definitions whose address has no record, or a record of
// another action.
func changedDefinitions(ctx context.Context, tx *sql.Tx, defs []Definition) ([]Definition, error) {
	addrs := make([]string, len(defs))
	for i, df := range defs {
		addrs[i] = df.Address
	}
	arr, err := json.Marshal(addrs)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT address, action_digest FROM definitions WHERE address IN (SELECT value FROM json_each(?))`, string(arr))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	recorded := make(map[string]string, len(defs))
	for rows.Next() {
		var a, action string
		if err := rows.Scan(&a, &action); err != nil {
			return nil, err
		}
		recorded[a] = action
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var changed []Definition
	for _, df := range defs {
		if action, ok := recorded[df.Address]; !ok || action != string(df.Action) {
			changed = append(changed, df)
		}
	}
	return changed, nil
}

// LastDefinition returns the definition recorded for a node address.
func (d *DB) LastDefinition(ctx context.Context, address string) (def Definition, found bool, err error) {
	var (
		action  string
		updated sql.NullInt64
	)
	err = d.db.QueryRowContext(ctx, `SELECT action_digest, definition, updated FROM definitions WHERE address = ?`, address).Scan(&action, &def.JSON, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return Definition{}, false, nil
	}
	if err != nil {
		return Definition{}, false, fmt.Errorf("state: definition of %s: %w", address, err)
	}
	def.Address, def.Action, def.Updated = address, digest.Digest(action), fromNanos(updated)
	return def, true, nil
}
