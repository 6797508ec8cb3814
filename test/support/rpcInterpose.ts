// A JSON-RPC pass-through on loopback in front of an anvil that can run an action just before it forwards one chosen
// call: "the chain moves between two of the service's reads" at exactly the read a test names (another process's
// transaction landing, a front-runner, a refund arriving).
import { Effect } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

import { asCalls, readBody, type RpcCall } from "./rpcProxy.js"

export type { RpcCall } from "./rpcProxy.js"

export interface RpcInterpose {
  readonly url: string
  /** The next request holding a call that `matches` waits for `action`, then goes on to the node (once). */
  readonly before: (matches: (call: RpcCall) => boolean, action: () => Promise<void>) => void
  /** How many armed actions ran. */
  readonly fired: () => number
}

/** An `eth_call` whose calldata (direct, or inside a multicall) holds `fragment` (lowercase hex, no 0x). */
export const ethCallHolding = (fragment: string) => (call: RpcCall) => {
  if (call.method !== "eth_call") return false
  const request = call.params?.[0]
  if (typeof request !== "object" || request === null) return false
  const data = "data" in request ? request.data : "input" in request ? request.input : undefined
  return typeof data === "string" && data.toLowerCase().includes(fragment)
}

/** Calldata of `balanceOf(address)`: the selector and the padded address. */
export const balanceOfCall = (address: string) => `70a08231${address.toLowerCase().replace(/^0x/, "").padStart(64, "0")}`

export const rpcInterpose = (upstream: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      let armed: { matches: (call: RpcCall) => boolean; action: () => Promise<void> } | undefined
      let fired = 0
      const server = createServer((req, res) => {
        void (async () => {
          const body = await readBody(req)
          const hook = armed
          if (hook !== undefined && asCalls(body).some(hook.matches)) {
            armed = undefined
            await hook.action()
            fired++
          }
          const answer = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body })
          res.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text())
        })().catch(() => {
          if (!res.headersSent) res.writeHead(502).end()
        })
      })
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
      const address: AddressInfo | string | null = server.address()
      if (address === null || typeof address === "string") throw new Error("the RPC pass-through has no TCP address")
      const interpose: RpcInterpose = {
        url: `http://127.0.0.1:${address.port}`,
        before: (matches, action) => {
          armed = { matches, action }
        },
        fired: () => fired
      }
      return { server, interpose }
    }),
    ({ server }) =>
      Effect.promise(() => {
        server.closeAllConnections()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  ).pipe(Effect.map(({ interpose }) => interpose))
