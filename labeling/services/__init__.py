"""Write operations of the annotation domain, one module per sub-domain.

Callers import the module they need (`from labeling.services import workbench`); nothing is
re-exported here.

- `workbench`: labeling sessions: queues and leases, rating, submission, the workbench state.
- `importing`: problems and candidate solutions from JSONL (`ImportFailed`, `ImportResult`),
  and the JSONL reading and bulk inserts every import shares.
- `prm800k_import`: PRM800K label lines into problems, solutions, labelers and sessions.
- `import_jobs`: an uploaded file checked, stored and imported by a worker.
- `labelers`: the pseudonymous labeler behind a user, or behind an imported UUID.

Elsewhere in the app: grading and its verdict cache (`labeling.grading`), the PRM800K export
(`labeling.export`), quality control (`labeling.quality`), demo data (`labeling.demo.seed`).
"""
