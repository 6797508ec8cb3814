// This server process's name among the instances sharing one database: INSTANCE_ID, or generated at start (host name and
// a random suffix), logged once. A node:cluster worker (WEB_CONCURRENCY > 1) appends its worker number, so the workers
// of one host are distinct instances. It names a lease's holder and labels this process's metrics.
import { Config, Effect } from "effect"
import cluster from "node:cluster"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"

const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/

const configured = Config.option(
  Config.string("INSTANCE_ID").pipe(
    Config.validate({ message: "INSTANCE_ID must be 1-64 letters, digits and . _ : - (starting with a letter or digit)", validation: (s) => INSTANCE_ID.test(s) })
  )
)

/** A generated id: the host's name (cut, made label-safe) and 6 random hex digits. */
const generated = () => {
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 40)
  return `${host === "" ? "instance" : host}-${randomBytes(3).toString("hex")}`
}

export class Instance extends Effect.Service<Instance>()("cluster/Instance", {
  effect: Effect.gen(function* () {
    const base = (yield* configured).pipe((o) => (o._tag === "Some" ? o.value : generated()))
    const id = cluster.isWorker && cluster.worker !== undefined ? `${base}.w${cluster.worker.id}` : base
    yield* Effect.logInfo(`instance id: ${id}`, { event: "instance.started", instance: id, pid: process.pid })
    return { id } as const
  })
}) {}
