-- Work that must run once per cluster (the treasury's reconciliation and its drift alerts, the gas watch's alerts, the
-- cluster-wide gauges of /metrics) runs only in the instance holding its lease: one row per job, naming the holder
-- (an instance id) and until when it holds. Taken or renewed by one statement (layers/Leases.ts); a holder that dies
-- stops renewing and loses it once `expires_at` passes, measured by the database's clock (one clock for every host).
CREATE TABLE leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL,
  acquired_at timestamptz NOT NULL DEFAULT now()
);
