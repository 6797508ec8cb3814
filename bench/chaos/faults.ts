// The campaign's faults, one per round, each at a random moment of the round's load: kill -9 of one instance (its
// supervisor restarts it), kill -9 of PostgreSQL (then started again on the same data), the RPC failing or hanging for
// seconds, and a reorg of a few blocks (a branch the node takes back whole: see `reorg`).
import { BenchError, sleep } from "../lib/params.js"
import type { Cluster } from "./cluster.js"
import { waitHealthy } from "../lib/servers.js"

export const FAULT_KINDS = ["kill-instance", "kill-postgres", "rpc-fail", "rpc-hang", "reorg"] as const
export type FaultKind = (typeof FAULT_KINDS)[number]

export interface Fault {
  readonly kind: FaultKind
  /** What exactly happened (which instance, how long, how deep). */
  readonly detail: string
}

const rpc = async (url: string, method: string, params: ReadonlyArray<unknown>) => {
  const answer = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) })
  const body = (await answer.json()) as { result?: unknown; error?: { message?: string } }
  if (body.error !== undefined) throw new BenchError(`${method}: ${body.error.message ?? "error"}`)
  return body.result
}

/** Waits until the instance's supervisor runs a new server that answers /health (after a kill). */
const restarted = async (cluster: Cluster, index: number, killed: ReadonlyArray<number>) => {
  const instance = cluster.instances[index]!
  const deadline = Date.now() + 120_000
  while (cluster.serverPids(instance).every((pid) => killed.includes(pid))) {
    if (Date.now() > deadline) throw new BenchError(`${instance.name}: its supervisor did not start a new server`)
    await sleep(200)
  }
  await waitHealthy(instance.origin, instance.supervisor, 120_000)
}

/** Runs one fault of `kind`; `random` draws its parameters. Resolves once the cluster was given back its part. */
export const inject = async (cluster: Cluster, kind: FaultKind, random: () => number): Promise<Fault> => {
  switch (kind) {
    case "kill-instance": {
      const index = random() < 0.5 ? 0 : 1
      const instance = cluster.instances[index]!
      const pids = cluster.serverPids(instance)
      if (pids.length === 0) throw new BenchError(`${instance.name}: no server process under its supervisor`)
      for (const pid of pids) process.kill(pid, "SIGKILL")
      await restarted(cluster, index, pids)
      return { kind, detail: `${instance.name} (pids ${pids.join(", ")})` }
    }
    case "kill-postgres": {
      const downMs = 1_000 + Math.floor(random() * 4_000)
      cluster.killPostgres()
      await sleep(downMs)
      await cluster.restartPostgres()
      return { kind, detail: `down ${downMs} ms` }
    }
    case "rpc-fail":
    case "rpc-hang": {
      const ms = 2_000 + Math.floor(random() * 6_000)
      cluster.setRpc(kind === "rpc-fail" ? "fail" : "hang")
      await sleep(ms)
      cluster.setRpc("pass")
      return { kind, detail: `${ms} ms` }
    }
    case "reorg": {
      // `anvil_reorg` re-executes the replaced blocks' transactions on the new branch, and once produced an invalid
      // chain (a transaction included at a nonce ahead of its sender's, its transfer never applied; docs/reliability.md).
      // This reorg keeps the node a valid chain: mining stops, the node's state is snapshotted, the pending transactions
      // are mined into `depth` blocks that the instances see, then the node reverts to the snapshot (those blocks and
      // their transactions are gone, as on a branch that lost) and a longer empty branch is mined on top. What the
      // instances had sent must be found missing and sent again.
      const depth = 1 + Math.floor(random() * 3)
      let removed = 0
      await rpc(cluster.anvilUrl, "evm_setAutomine", [false])
      try {
        const snapshot = await rpc(cluster.anvilUrl, "evm_snapshot", [])
        await sleep(1_000 + Math.floor(random() * 1_000)) // transactions gather in the pool
        await rpc(cluster.anvilUrl, "anvil_mine", [`0x${depth.toString(16)}`])
        const head = Number(await rpc(cluster.anvilUrl, "eth_blockNumber", []))
        for (let n = head - depth + 1; n <= head; n++) {
          const block = (await rpc(cluster.anvilUrl, "eth_getBlockByNumber", [`0x${n.toString(16)}`, false])) as { transactions?: ReadonlyArray<unknown> }
          removed += block.transactions?.length ?? 0
        }
        await sleep(700) // the instances see the receipts of the branch that will lose
        const reverted = await rpc(cluster.anvilUrl, "evm_revert", [snapshot])
        if (reverted !== true) throw new BenchError(`evm_revert(${String(snapshot)}) answered ${String(reverted)}`)
        await rpc(cluster.anvilUrl, "anvil_mine", [`0x${(depth + 1).toString(16)}`])
      } finally {
        await rpc(cluster.anvilUrl, "evm_setAutomine", [true])
      }
      return { kind, detail: `depth ${depth}, ${removed} transactions taken out` }
    }
  }
}

/** anvil_mine: blocks on top, so that what the round did becomes final. */
export const mine = (cluster: Cluster, blocks: number) => rpc(cluster.anvilUrl, "anvil_mine", [`0x${blocks.toString(16)}`])
