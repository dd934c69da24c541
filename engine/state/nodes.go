package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/foundry-build/foundry/digest"
)

// NodeStatus is the state of one node within one run.
type NodeStatus string

const (
	NodePending NodeStatus = "pending" // planned, not started
	NodeRunning NodeStatus = "running" // an attempt is (or was, if the run died) executing
	NodeDone    NodeStatus = "done"    // executed and succeeded in this run
	NodeCached  NodeStatus = "cached"  // satisfied from the action cache, nothing executed
	NodeFailed  NodeStatus = "failed"
	NodeSkipped NodeStatus = "skipped" // not run because a dependency failed
)

// Node is one node of one run.
type Node struct {
	RunID    string        `json:"run"`
	Address  string        `json:"address"` // the node's address in the graph, e.g. recipe.int-sort-go.step.build
	Action   digest.Digest `json:"action"`
	Status   NodeStatus    `json:"status"`
	ExitCode *int          `json:"exit_code"`       // nil when no process exit was observed
	Error    string        `json:"error,omitempty"` // why it failed or was skipped
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
}

// NodeRef names a node and the action digest it has in a run.
type NodeRef struct {
	Address string
	Action  digest.Digest
}

// StartNodes records the planned nodes of a run in one transaction (one commit): pending
// ones, and the ones already satisfied by the action cache as cached together with their
// definitions (see RecordDefinition). A pending node already recorded for the run keeps
// its state.
func (d *DB) StartNodes(ctx context.Context, runID string, pending, cached []NodeRef, defs []Definition) error {
	pend, err := nodeArray(pending)
	if err != nil {
		return fmt.Errorf("state: add nodes to run %s: %w", runID, err)
	}
	hits, err := nodeArray(cached)
	if err != nil {
		return fmt.Errorf("state: mark nodes cached in run %s: %w", runID, err)
	}
	what := fmt.Sprintf("add %d pending and %d cached nodes to run %s", len(pending), len(cached), runID)
	return d.tx(ctx, what, func(tx *sql.Tx) error {
		if len(pending) > 0 {
			// One statement over a JSON array: SQLite inserts the rows without a round
			// trip through the driver per node.
			if _, err := tx.ExecContext(ctx, `
INSERT INTO nodes (run_id, address, action_digest, status)
SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'pending' FROM json_each(?) WHERE true
ON CONFLICT (run_id, address) DO NOTHING`, runID, pend); err != nil {
				return err
			}
		}
		if len(cached) > 0 {
			if err := markCached(ctx, tx, runID, hits); err != nil {
				return err
			}
		}
		return recordDefinitions(ctx, tx, defs)
	})
}

// nodeArray encodes nodes as a JSON array of [address, action] pairs.
func nodeArray(nodes []NodeRef) (string, error) {
	pairs := make([][2]string, len(nodes))
	for i, n := range nodes {
		if n.Address == "" {
			return "", fmt.Errorf("node %d has an empty address", i)
		}
		pairs[i] = [2]string{n.Address, string(n.Action)}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}

// NodeStarted marks a node running (creating its row if StartNodes did not).
func (d *DB) NodeStarted(ctx context.Context, runID, address string, action digest.Digest) error {
	return d.tx(ctx, "start node "+address, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
INSERT INTO nodes (run_id, address, action_digest, status, started) VALUES (?, ?, ?, 'running', ?)
ON CONFLICT (run_id, address) DO UPDATE SET action_digest = excluded.action_digest, status = 'running',
	started = excluded.started, finished = NULL, exit_code = NULL, error = ''`,
			runID, address, string(action), nanos(time.Now()))
		return err
	})
}

// NodeResult is how a node ended.
type NodeResult struct {
	Status   NodeStatus // done, cached, failed or skipped
	ExitCode *int
	Error    string
}

// NodeFinished records how a node ended. For NodeDone the engine must already have stored
// the outputs and the action cache entry: a crash right after that and before this call is
// then resumed as a cache hit, not a re-execution.
func (d *DB) NodeFinished(ctx context.Context, runID, address string, res NodeResult) error {
	switch res.Status {
	case NodeDone, NodeCached, NodeFailed, NodeSkipped:
	default:
		return fmt.Errorf("state: finish node %s: %q is not a final status", address, res.Status)
	}
	return d.tx(ctx, "finish node "+address, func(tx *sql.Tx) error {
		var code sql.NullInt64
		if res.ExitCode != nil {
			code = sql.NullInt64{Int64: int64(*res.ExitCode), Valid: true}
		}
		r, err := tx.ExecContext(ctx, `UPDATE nodes SET status = ?, exit_code = ?, error = ?, finished = ? WHERE run_id = ? AND address = ?`,
			string(res.Status), code, res.Error, nanos(time.Now()), runID, address)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("node %s in run %s: %w", address, runID, ErrNotFound)
		}
		return nil
	})
}

// NodesCached marks many nodes as satisfied from the action cache in one transaction (one
// fsync), creating their rows as needed.
func (d *DB) NodesCached(ctx context.Context, runID string, nodes []NodeRef) error {
	arr, err := nodeArray(nodes)
	if err != nil {
		return fmt.Errorf("state: mark nodes cached in run %s: %w", runID, err)
	}
	return d.tx(ctx, fmt.Sprintf("mark %d nodes cached in run %s", len(nodes), runID), func(tx *sql.Tx) error {
		return markCached(ctx, tx, runID, arr)
	})
}

// markCached marks the nodes of a nodeArray cached.
func markCached(ctx context.Context, tx *sql.Tx, runID, arr string) error {
	now := nanos(time.Now())
	_, err := tx.ExecContext(ctx, `
INSERT INTO nodes (run_id, address, action_digest, status, started, finished)
SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), 'cached', ?, ? FROM json_each(?) WHERE true
ON CONFLICT (run_id, address) DO UPDATE SET action_digest = excluded.action_digest, status = 'cached',
	started = excluded.started, finished = excluded.finished, exit_code = NULL, error = ''`,
		runID, now, now, arr)
	return err
}

const nodeColumns = `n.run_id, n.address, n.action_digest, n.status, n.exit_code, n.error, n.started, n.finished`

func scanNode(s interface{ Scan(...any) error }) (Node, error) {
	var (
		n                 Node
		action, status    string
		code              sql.NullInt64
		started, finished sql.NullInt64
	)
	if err := s.Scan(&n.RunID, &n.Address, &action, &status, &code, &n.Error, &started, &finished); err != nil {
		return Node{}, err
	}
	n.Action, n.Status = digest.Digest(action), NodeStatus(status)
	if code.Valid {
		c := int(code.Int64)
		n.ExitCode = &c
	}
	n.Started, n.Finished = fromNanos(started), fromNanos(finished)
	return n, nil
}

// Nodes lists the nodes of a run, ordered by address.
func (d *DB) Nodes(ctx context.Context, runID string) ([]Node, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+nodeColumns+` FROM nodes n WHERE n.run_id = ? ORDER BY n.address`, runID)
	if err != nil {
		return nil, fmt.Errorf("state: nodes of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("state: nodes of run %s: %w", runID, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("state: nodes of run %s: %w", runID, err)
	}
	return out, nil
}

const lastNodeResultQuery = `SELECT ` + nodeColumns + ` FROM runs r CROSS JOIN nodes n ON n.run_id = r.id AND n.address = ?
WHERE n.status IN ('done','cached','failed')
ORDER BY r.started DESC LIMIT 1`

// LastNodeResult returns the most recent outcome (done, cached or failed) recorded for a
// node address in any run, for `foundry explain`; found is false when it never ran. The
// CROSS JOIN keeps runs the outer loop, newest first, each probing the nodes primary key:
// a few seeks, where the planner would otherwise scan every node row.
func (d *DB) LastNodeResult(ctx context.Context, address string) (n Node, found bool, err error) {
	n, err = scanNode(d.db.QueryRowContext(ctx, lastNodeResultQuery, address))
	if errors.Is(err, sql.ErrNoRows) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, fmt.Errorf("state: last result of %s: %w", address, err)
	}
	return n, true, nil
}

// CountNodes counts nodes by status: the one count of a run's failed (done, cached,
// skipped) nodes that apply's summary and status both print.
func CountNodes(nodes []Node) map[NodeStatus]int {
	counts := map[NodeStatus]int{}
	for _, n := range nodes {
		counts[n.Status]++
	}
	return counts
}
