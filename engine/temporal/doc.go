// Package temporal runs an apply's steps on Temporal workers (spec/temporal.md).
//
// The walk stays in engine/run: one implementation decides what runs, caches, attests and
// publishes, so the embedded and the Temporal engine give the same action digests, outputs
// and provenance subjects. What this package adds is where a step runs:
//
//   - Executor is the apply's side. It is an executors.Executor whose Run starts one
//     workflow per apply (Workflow) on first use and hands each action to it as an update;
//     the workflow runs it as an activity whose ID is the logical action (node and cache
//     key), on the task queue of the step's platform. Inputs go to the project's OCI
//     registry first, by digest, and the outputs come back the same way.
//   - Worker is `foundry worker`: it runs the workflow and the activities (Activities.Run)
//     in its local sandboxed executor, fetching what a step mounts from the registry and
//     checking every blob against its digest before a step sees it.
//
// A step's non-zero exit is a result, returned as data; only infrastructure failures are
// retried, on any worker. Temporal fences attempts: a worker whose attempt timed out cannot
// complete it over the retry's result. Effects (publish, deliver) stay in the apply and its
// outbox, so a retried step never duplicates them. Evaluations and acceptance stay on the
// apply's own sandbox: sealed cases never reach a registry or a worker.
//
// It never imports engine/graph, engine/plan or engine/run (ARCHITECTURE.md's import rules,
// checked by internal/architecture).
package temporal
