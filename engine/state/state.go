// Package state is Foundry's durable run journal: a SQLite database (normally
// .foundry/state.db) that records runs, the nodes of each run, every execution attempt
// with the container ID it used, what happened to capabilities in each run (evaluations,
// rejections, admissions), the outbox of external effects, quarantined digests, the last
// action definition of each node address (for `foundry explain`), and the raw records of
// the action cache.
//
// What it guarantees: every write is one SQLite transaction in WAL mode, so a process
// killed at any point (kill -9) leaves either the old or the new row, never a torn one;
// synchronous=NORMAL keeps that (a committed transaction is in the WAL before the writer
// returns) without an fsync per commit, which would serialize parallel steps on the disk.
// A power loss may lose the last commits, never corrupt the database: they are then redone
// (an action whose result record was lost runs again; nothing is cached that did not run); the schema is versioned (PRAGMA user_version) and migrated in
// order; foreign keys are enforced.
//
// How a killed apply is resumed (invariant 6): the engine writes AttemptStarted — with the
// container ID prefix — before it creates a container; it records a node's outputs in the
// content store and the action cache before NodeFinished. On the next apply,
// InterruptedAttempts lists attempts whose run is no longer alive (its run lock is free),
// the engine asks the executor to clean up their container prefixes and closes them with
// AttemptFinished(OutcomeInterrupted); RecoverRuns marks the dead runs interrupted and
// parks the effects they had dispatched as unknown; finished nodes are found in the action
// cache and are not re-executed. An external effect is recorded (EffectIntent) and claimed
// (EffectDispatching) before it is performed, under a deterministic ID, so a rerun skips
// what succeeded and never blindly repeats what may have happened.
//
// What it must never do: decide whether an action succeeded (the engine does, from what
// the executor observed), hold blobs (those live in package store), or interpret cache
// records or definitions (engine/cache reads the records, engine/plan compares the
// definitions for explain; this package stores their bytes).
package state

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
)

// stateDriver opens the state database's connections. Its own instance, so that its
// connection hook reaches no other SQLite database in the process.
var stateDriver = func() *sqlite.Driver {
	d := &sqlite.Driver{}
	// Keep the WAL (and its shared-memory index) when the last connection closes. Close
	// still checkpoints, so state.db alone is complete afterwards; deleting both files and
	// creating them again would be a cost paid by every command.
	d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
		fc, ok := c.(sqlite.FileControl)
		if !ok {
			return errors.New("state: the SQLite connection offers no file control")
		}
		_, err := fc.FileControlPersistWAL("main", 1)
		return err
	})
	return d
}()

// connector opens state database connections through stateDriver.
type connector struct{ dsn string }

func (c connector) Connect(context.Context) (driver.Conn, error) { return stateDriver.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return stateDriver }

// busyTimeout is how long a writer waits for another writer (another goroutine or
// another foundry process on the same project) before SQLITE_BUSY.
const busyTimeout = 30 * time.Second

// DB is an open state database. It is safe for concurrent use by many goroutines, and
// several processes may open the same file.
type DB struct {
	db   *sql.DB
	path string
	// lockDir holds one lock file per run started by this or another process; a run
	// whose lock can be taken is not alive any more.
	lockDir string

	mu    sync.Mutex
	locks map[string]*os.File // runs begun by this DB, by ID
}

// OpenState opens (creating if needed) the state database at path and migrates its schema
// to the newest version this binary knows. It refuses a database written by a newer
// foundry (a higher schema version).
func OpenState(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state: resolve %s: %w", path, err)
	}
	if strings.ContainsAny(abs, "?#") {
		return nil, fmt.Errorf("state: database path %q must not contain '?' or '#'", abs)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("state: create directory for %s: %w", abs, err)
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "1")
	// Statement journals and temporary tables stay in memory: a multi-row insert otherwise
	// creates a file in /var/tmp and copies every page it changes there first.
	q.Add("_pragma", "temp_store(MEMORY)")
	// With the WAL kept (see stateDriver), a limit makes the last close truncate it to
	// nothing once checkpointed: no stale frames for the next command to read back, and none
	// to replay into a state.db that was deleted on its own. The limit also caps the file
	// when a checkpoint restarts it.
	q.Add("_pragma", "journal_size_limit(4194304)")
	// Write transactions start with BEGIN IMMEDIATE: they take the write lock up front and
	// wait for it (busy timeout) instead of failing when a read lock cannot be upgraded.
	q.Set("_txlock", "immediate")
	sdb := sql.OpenDB(connector{abs + "?" + q.Encode()})
	// WAL lets readers run beside one writer; more connections than that only add memory.
	sdb.SetMaxOpenConns(8)
	sdb.SetMaxIdleConns(8)
	d := &DB{
		db:      sdb,
		path:    abs,
		lockDir: abs + ".runs",
		locks:   map[string]*os.File{},
	}
	if err := d.migrate(context.Background()); err != nil {
		sdb.Close()
		return nil, err
	}
	if err := os.MkdirAll(d.lockDir, 0o755); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("state: create run lock directory %s: %w", d.lockDir, err)
	}
	return d, nil
}

// Path returns the absolute path of the database file.
func (d *DB) Path() string { return d.path }

// SQL returns the underlying handle, for tests and read-only diagnostics. Writers must use
// the typed methods so that the invariants above hold.
func (d *DB) SQL() *sql.DB { return d.db }

// Close releases the run locks this DB holds (their runs then look interrupted unless
// FinishRun was called) and closes the database.
func (d *DB) Close() error {
	d.mu.Lock()
	for id, f := range d.locks {
		f.Close()
		delete(d.locks, id)
	}
	d.mu.Unlock()
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("state: close %s: %w", d.path, err)
	}
	return nil
}

// SchemaVersion reports the schema version of the open database.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := d.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("state: read schema version: %w", err)
	}
	return v, nil
}

// tx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
func (d *DB) tx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	t, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("state: %s: begin: %w", what, err)
	}
	if err := fn(t); err != nil {
		t.Rollback()
		return fmt.Errorf("state: %s: %w", what, err)
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("state: %s: commit: %w", what, err)
	}
	return nil
}

// ErrNotFound is returned (wrapped) when a named run, node or attempt does not exist.
var ErrNotFound = errors.New("not found")

// Times are stored as Unix nanoseconds (UTC); the zero time is stored as NULL.
func nanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

func newRunID(now time.Time) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("state: run id: %w", err)
	}
	// Lower-case letters, digits and '-' only: the ID becomes part of container names.
	return "r" + strings.ToLower(now.UTC().Format("20060102t150405")) + "-" + hex.EncodeToString(b[:]), nil
}
