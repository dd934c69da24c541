package state

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] moves the schema from version i to version i+1. Append only: a released
// migration is never edited, because databases in the field already ran it.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE runs (
	id          TEXT PRIMARY KEY,
	started     INTEGER NOT NULL,
	finished    INTEGER,
	status      TEXT NOT NULL CHECK (status IN ('running','succeeded','failed','interrupted')),
	plan_digest TEXT NOT NULL,
	args        TEXT NOT NULL DEFAULT '[]',
	host        TEXT NOT NULL DEFAULT '',
	pid         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_started ON runs (started);

CREATE TABLE nodes (
	run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	address       TEXT NOT NULL,
	action_digest TEXT NOT NULL,
	status        TEXT NOT NULL CHECK (status IN ('pending','running','done','cached','failed','skipped')),
	exit_code     INTEGER,
	error         TEXT NOT NULL DEFAULT '',
	started       INTEGER,
	finished      INTEGER,
	PRIMARY KEY (run_id, address)
);
CREATE INDEX nodes_by_address ON nodes (address);

CREATE TABLE attempts (
	run_id       TEXT NOT NULL,
	address      TEXT NOT NULL,
	n            INTEGER NOT NULL CHECK (n >= 1),
	executor     TEXT NOT NULL,
	container_id TEXT NOT NULL,
	started      INTEGER NOT NULL,
	finished     INTEGER,
	outcome      TEXT NOT NULL CHECK (outcome IN ('running','succeeded','failed','timed_out','error','interrupted')),
	detail       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, address, n),
	FOREIGN KEY (run_id, address) REFERENCES nodes (run_id, address) ON DELETE CASCADE
);
CREATE INDEX attempts_running ON attempts (run_id) WHERE outcome = 'running';

CREATE TABLE quarantine (
	digest TEXT PRIMARY KEY,
	reason TEXT NOT NULL,
	added  INTEGER NOT NULL
);

CREATE TABLE definitions (
	address       TEXT PRIMARY KEY,
	action_digest TEXT NOT NULL,
	definition    BLOB NOT NULL,
	updated       INTEGER NOT NULL
);

CREATE TABLE action_cache (
	action_digest TEXT PRIMARY KEY,
	record        BLOB NOT NULL,
	stored        INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 2: the outbox of external effects (publish, deliver), so a killed apply never
	// repeats one blindly.
	`
CREATE TABLE effects (
	id          TEXT PRIMARY KEY,
	run_id      TEXT NOT NULL REFERENCES runs (id),
	address     TEXT NOT NULL,
	kind        TEXT NOT NULL,
	destination TEXT NOT NULL,
	status      TEXT NOT NULL CHECK (status IN ('intended','dispatched','succeeded','failed','unknown')),
	result      TEXT NOT NULL DEFAULT '',
	created     INTEGER NOT NULL,
	updated     INTEGER NOT NULL
);
CREATE INDEX effects_open ON effects (status) WHERE status IN ('dispatched','unknown');
`,
	// 3: evaluations of capability candidates, so that a candidate meets the sealed suite
	// exactly once; and sealed cases retired because a builder was shown them.
	`
CREATE TABLE evaluations (
	contract_digest  TEXT NOT NULL,
	candidate_digest TEXT NOT NULL,
	suite            TEXT NOT NULL CHECK (suite IN ('dev','repair','sealed')),
	passed           INTEGER NOT NULL CHECK (passed IN (0, 1)),
	record           BLOB NOT NULL,
	evaluated        INTEGER NOT NULL,
	PRIMARY KEY (contract_digest, candidate_digest, suite)
);

CREATE TABLE retired_cases (
	capability  TEXT NOT NULL,
	case_digest TEXT NOT NULL,
	case_name   TEXT NOT NULL,
	reason      TEXT NOT NULL,
	retired     INTEGER NOT NULL,
	PRIMARY KEY (capability, case_digest)
);
`,
	// 4: every apply inserts a row per node, and an index on address alone took each
	// insert to a random page of an index that grows with the history (a no-op apply of
	// 10,000 steps slowed from 0.95 s to 1.26 s over 30 runs). LastNodeResult probes the
	// primary key run by run instead.
	`DROP INDEX nodes_by_address;`,
	// 5: sealed verdicts, keyed by the signed test result that is their evidence and indexed
	// by candidate, contract and suite digest; a withdrawal is recorded beside the verdict.
	`
CREATE TABLE verdicts (
	envelope_digest  TEXT PRIMARY KEY,
	capability       TEXT NOT NULL,
	contract_digest  TEXT NOT NULL,
	candidate_digest TEXT NOT NULL,
	suite_digest     TEXT NOT NULL,
	passed           INTEGER NOT NULL CHECK (passed IN (0, 1)),
	record           BLOB NOT NULL,
	evaluated        INTEGER NOT NULL,
	withdrawn        INTEGER,
	withdrawn_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX verdicts_by_candidate ON verdicts (contract_digest, candidate_digest, suite_digest);
`,
	// 6: an operator's decision on an effect left unknown (foundry effects resolve): what
	// they decided, who, when and why. Kept after the engine moves the effect on, as its
	// history.
	`
ALTER TABLE effects ADD COLUMN decision TEXT NOT NULL DEFAULT '' CHECK (decision IN ('', 'succeeded', 'failed'));
ALTER TABLE effects ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
ALTER TABLE effects ADD COLUMN decided INTEGER;
ALTER TABLE effects ADD COLUMN decision_reason TEXT NOT NULL DEFAULT '';
`,
	// 7: what happened to capabilities in each run (suites evaluated, candidates rejected,
	// admissions, pins), for foundry status: the evaluations table keeps only the last
	// outcome per candidate and suite, and no run.
	`
CREATE TABLE capability_events (
	run_id       TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	seq          INTEGER NOT NULL CHECK (seq >= 1),
	at           INTEGER NOT NULL,
	type         TEXT NOT NULL,
	capability   TEXT NOT NULL,
	recipe       TEXT NOT NULL DEFAULT '',
	suite        TEXT NOT NULL DEFAULT '',
	passed       INTEGER CHECK (passed IN (0, 1)),
	cases        INTEGER,
	cases_passed INTEGER,
	ref          TEXT NOT NULL DEFAULT '',
	message      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
`,
	// 8: reconstruction jobs, one per contract, target and trust policy, and their rounds
	// with what each used, so that an apply killed mid-job resumes it (spec/capability.md
	// §5a): finished rounds are not run again and what was spent stays spent.
	`
CREATE TABLE jobs (
	id              TEXT PRIMARY KEY,
	capability      TEXT NOT NULL,
	contract_digest TEXT NOT NULL,
	target          TEXT NOT NULL,
	policy_digest   TEXT NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('open','admitted','exhausted','unresolved')),
	budget          TEXT NOT NULL,
	outcome         TEXT NOT NULL DEFAULT '',
	admitted        TEXT NOT NULL DEFAULT '',
	waiting         TEXT NOT NULL DEFAULT '[]',
	opened          INTEGER NOT NULL,
	updated         INTEGER NOT NULL,
	UNIQUE (contract_digest, target, policy_digest)
);

CREATE TABLE job_rounds (
	job_id         TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	n              INTEGER NOT NULL CHECK (n >= 1),
	source         TEXT NOT NULL,
	run_id         TEXT NOT NULL,
	status         TEXT NOT NULL CHECK (status IN ('running','failed','rejected','admitted')),
	builder_action TEXT NOT NULL DEFAULT '',
	candidate      TEXT NOT NULL DEFAULT '',
	failure        BLOB,
	used           TEXT NOT NULL DEFAULT '{}',
	attempts       INTEGER NOT NULL DEFAULT 1,
	started        INTEGER NOT NULL,
	finished       INTEGER,
	PRIMARY KEY (job_id, n)
);
`,
	// 9: proposals sent from outside a job (foundry jobs propose, the MCP propose tool), one
	// per round, and the brief each round's proposer reads (the /job tree's digest).
	`
ALTER TABLE job_rounds ADD COLUMN brief TEXT NOT NULL DEFAULT '';

CREATE TABLE proposals (
	job_id    TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	n         INTEGER NOT NULL CHECK (n >= 1),
	tree      TEXT NOT NULL,
	source    TEXT NOT NULL,
	by        TEXT NOT NULL DEFAULT '',
	spend     REAL NOT NULL DEFAULT 0 CHECK (spend >= 0),
	submitted INTEGER NOT NULL,
	PRIMARY KEY (job_id, n)
);
`,
	// 10: releases of products to their destinations, in the order they were delivered,
	// and each (product, destination)'s channel: the release it points at now.
	`
CREATE TABLE releases (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	product     TEXT NOT NULL,
	destination TEXT NOT NULL,
	release     TEXT NOT NULL,
	location    TEXT NOT NULL,
	receipt     TEXT NOT NULL DEFAULT '',
	delivered   INTEGER NOT NULL,
	UNIQUE (product, destination, release)
);
CREATE TABLE release_channels (
	product     TEXT NOT NULL,
	destination TEXT NOT NULL,
	release     TEXT NOT NULL,
	moved       INTEGER NOT NULL,
	reason      TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (product, destination)
);
`,
	// 11: a round's open reservation (what the part of it an apply dispatched may take,
	// recorded before dispatch and cleared when that part is charged) and whether its
	// proposal was charged, so that a round an apply died in is charged each part exactly
	// once, and a reservation never released counts as spent (spec/capability.md §5a).
	`
ALTER TABLE job_rounds ADD COLUMN reserved TEXT NOT NULL DEFAULT '';
ALTER TABLE job_rounds ADD COLUMN proposal_charged INTEGER NOT NULL DEFAULT 0 CHECK (proposal_charged IN (0, 1));
`,
	// 12: the logs of a round's runs (its builder's, its build's): what the builder
	// observed, for foundry jobs show (a JSON list of RunLog).
	`
ALTER TABLE job_rounds ADD COLUMN logs TEXT NOT NULL DEFAULT '';
`,
	// 13: the digest of a job's reference dossier (spec/capability.md §5b), '' without one.
	`
ALTER TABLE jobs ADD COLUMN dossier TEXT NOT NULL DEFAULT '';
`,
	// 14: what a round's builder asked the references as an oracle, and where the answers
	// are (a JSON Oracle, '' when it asked nothing; spec/capability.md §5b).
	`
ALTER TABLE job_rounds ADD COLUMN oracle TEXT NOT NULL DEFAULT '';
`,
}

// Version is the schema version this binary writes.
var Version = len(migrations)

func (d *DB) migrate(ctx context.Context) error {
	// One connection for the whole migration, so that BEGIN IMMEDIATE serialises two
	// processes opening a fresh database at the same moment.
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("state: migrate %s: %w", d.path, err)
	}
	defer conn.Close()
	for {
		done, err := d.migrateOne(ctx, conn)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateOne applies the next pending migration in its own transaction together with the
// version bump, so a crash leaves the schema at either the old or the new version.
func (d *DB) migrateOne(ctx context.Context, conn *sql.Conn) (done bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("state: migrate %s: begin: %w", d.path, err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return false, fmt.Errorf("state: migrate %s: read version: %w", d.path, err)
	}
	switch {
	case v > len(migrations):
		return false, fmt.Errorf("state: %s has schema version %d, newer than this foundry knows (%d); upgrade foundry", d.path, v, len(migrations))
	case v == len(migrations):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("state: migrate %s from version %d to %d: %w", d.path, v, v+1, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
		return false, fmt.Errorf("state: migrate %s: set version %d: %w", d.path, v+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("state: migrate %s to version %d: commit: %w", d.path, v+1, err)
	}
	return false, nil
}
