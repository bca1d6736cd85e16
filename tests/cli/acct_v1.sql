-- An accounting database of schema version 1 (lib/core/acct/store.c), as vgpu wrote it before
-- version 2: tests/cli/acct.sh checks that vgpu acct migrates it and keeps its records.
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE jobs(id TEXT PRIMARY KEY, name TEXT NOT NULL, uid INTEGER NOT NULL, user TEXT NOT NULL,
  command TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, exit_code INTEGER NOT NULL,
  exit_signal INTEGER NOT NULL, run_as_user INTEGER NOT NULL);
CREATE INDEX jobs_by_end ON jobs(end_ns);
CREATE TABLE job_gpus(job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE, ordinal INTEGER NOT NULL,
  uuid TEXT NOT NULL, nvml_index INTEGER NOT NULL, mem_limit_bytes INTEGER NOT NULL, core_limit INTEGER NOT NULL,
  core_policy TEXT NOT NULL, priority INTEGER NOT NULL, oversub_device_bytes INTEGER NOT NULL,
  gpu_ns INTEGER NOT NULL, throttled_ns INTEGER NOT NULL, mem_peak_bytes INTEGER NOT NULL,
  mem_byte_seconds REAL NOT NULL, PRIMARY KEY(job_id, ordinal));
INSERT INTO meta VALUES('schema_version', '1');
INSERT INTO jobs VALUES('0123456789ab', 'old-train', 0, 'root', 'python3', 1790000000000000000,
  1790000100000000000, 0, 0, 0);
INSERT INTO job_gpus VALUES('0123456789ab', 0, 'GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91', 0, 8589934592, 50,
  'hard', 0, 0, 50000000000, 40000000000, 4294967296, 429496729600.0);
