// The official x402 facilitator (unmodified `@x402/core` + `@x402/evm` exact scheme, v1 and v2) on a loopback port,
// with its own freshly generated signer funded with gas on the run's anvil. `mode` makes it misbehave as a real one can.
import { x402Facilitator } from "@x402/core/facilitator"
import { toFacilitatorEvmSigner } from "@x402/evm"
import { ExactEvmScheme } from "@x402/evm/exact/facilitator"
import { ExactEvmSchemeV1 } from "@x402/evm/exact/v1/facilitator"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { createTestClient, createWalletClient, http, parseEther, publicActions } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/anvil.js"

/** How the facilitator answers `/settle`; `/verify` and `/supported` always answer as the package does. */
export type FacilitatorMode =
  | { readonly kind: "honest" }
  /** Runs `before` (e.g. a front-runner's transaction), then settles as the package does. */
  | { readonly kind: "after"; readonly before: (body: SettleBody) => Promise<void> }
  | { readonly kind: "status"; readonly status: number }
  /** Answers success with a transaction hash that paid nothing (a lying or buggy facilitator). */
  | { readonly kind: "lie" }
  /** Never answers (the socket stays open until the server closes). */
  | { readonly kind: "hang" }

export interface SettleBody {
  readonly paymentPayload: { readonly payload: { readonly signature: `0x${string}`; readonly authorization: Record<string, string> } }
  readonly paymentRequirements: Record<string, unknown>
}

export interface OfficialFacilitator {
  readonly url: string
  readonly address: `0x${string}`
  /** `/settle` calls received, whatever the mode. */
  readonly settleCalls: () => number
  setMode(mode: FacilitatorMode): void
  close(): Promise<void>
}

export const startOfficialFacilitator = async (rpcUrl: string): Promise<OfficialFacilitator> => {
  const account = privateKeyToAccount(generatePrivateKey())
  const chain = devnetChain(rpcUrl)
  await createTestClient({ mode: "anvil", chain, transport: http(rpcUrl) }).setBalance({ address: account.address, value: parseEther("10") })
  const client = createWalletClient({ account, chain, transport: http(rpcUrl), pollingInterval: 20 }).extend(publicActions)
  const signer = toFacilitatorEvmSigner({
    address: account.address,
    readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]),
    verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
    writeContract: (args) => client.writeContract(args as Parameters<typeof client.writeContract>[0]),
    sendTransaction: (args) => client.sendTransaction(args),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args)
  })
  // x402 v1 names its networks ("base-sepolia"); the package's type knows only CAIP-2 ids, its code matches either.
  const v1Network = "base-sepolia" as unknown as Parameters<x402Facilitator["registerV1"]>[0]
  const facilitator = new x402Facilitator()
    .registerV1(v1Network, new ExactEvmSchemeV1(signer))
    .register(`eip155:${chain.id}`, new ExactEvmScheme(signer))
  let mode: FacilitatorMode = { kind: "honest" }
  let settles = 0
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" })
        res.end(JSON.stringify(body))
      }
      const run = async () => {
        if (req.method === "GET" && req.url === "/supported") return answer(200, facilitator.getSupported())
        const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString())
        const body = parsed as SettleBody
        const { paymentPayload: payload, paymentRequirements: requirements } = parsed as {
          paymentPayload: Parameters<x402Facilitator["verify"]>[0]
          paymentRequirements: Parameters<x402Facilitator["verify"]>[1]
        }
        if (req.url === "/verify") return answer(200, await facilitator.verify(payload, requirements))
        if (req.url !== "/settle") return answer(404, { error: "not found" })
        settles++
        switch (mode.kind) {
          case "hang":
            return
          case "status":
            return answer(mode.status, { error: "facilitator unavailable" })
          case "lie":
            return answer(200, { success: true, transaction: `0x${"ab".repeat(32)}`, network: "base-sepolia", payer: body.paymentPayload.payload.authorization["from"] })
          case "after":
            await mode.before(body)
            break
          case "honest":
            break
        }
        // The package's own settle: it throws on some failures instead of answering; a real server answers 500 then.
        return answer(200, await facilitator.settle(payload, requirements))
      }
      run().catch((error: unknown) => answer(500, { success: false, errorReason: String(error).slice(0, 300) }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    address: account.address,
    settleCalls: () => settles,
    setMode: (next) => {
      mode = next
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
