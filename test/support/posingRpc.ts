// An RPC in front of a real anvil that answers `web3_clientVersion` as another client (geth by default) and passes
// everything else through: a chain that tools must treat as a real one.
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface PosingRpc {
  readonly url: string
  readonly close: () => Promise<void>
}

export const posingRpc = async (upstream: string, clientVersion = "Geth/v1.14.12-stable/linux-amd64/go1.23"): Promise<PosingRpc> => {
  const server: Server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString()
      const request: unknown = JSON.parse(body)
      if (typeof request === "object" && request !== null && "method" in request && request.method === "web3_clientVersion") {
        const id = "id" in request ? request.id : null
        res.setHeader("content-type", "application/json")
        res.end(JSON.stringify({ jsonrpc: "2.0", id, result: clientVersion }))
        return
      }
      fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body })
        .then(async (answer) => res.end(await answer.text()))
        .catch(() => res.destroy())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? (address satisfies AddressInfo).port : 0
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}
