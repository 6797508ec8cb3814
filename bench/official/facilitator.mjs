// The official x402 v1 facilitator for `npm run bench:official`, as the x402 repository's example facilitator builds it
// (examples/typescript/facilitator): express, the `x402` package's own zod schemas, its `verify`/`settle` from
// `x402/facilitator`, its own clients from `createConnectedClient` / `createSigner`. Nothing of the package is changed.
// One difference from the example: the clients are made once, not per request (cheaper for the official side).
// createSigner takes no RPC URL (viem's `http()` with the chain's default RPC): the chain object it uses
// (viem's baseSepolia, chain id 84532 like the devnet) gets the devnet's URL as its default RPC before the clients exist.
// SIGNER=package (default) is `createSigner` as shipped: a viem wallet client without a nonce manager, so concurrent
// settles race for the same nonce ("nonce too low"; measured and reported by the bench). SIGNER=nonce-manager builds
// the same client as createSigner (same chain, `http()`, publicActions) with viem's nonceManager on the account, the
// one change a facilitator serving concurrent settles needs (the marketplace and the paywall settle that way too).
// Env: RPC_URL, FACILITATOR_KEY (0x...), SIGNER. Plain JS: the root `tsc` must not see these packages (not installed in CI).
import express from "express"
import { createWalletClient, http, publicActions } from "viem"
import { nonceManager, privateKeyToAccount } from "viem/accounts"
import { baseSepolia } from "viem/chains"
import { settle, verify } from "x402/facilitator"
import { createConnectedClient, createSigner, PaymentPayloadSchema, PaymentRequirementsSchema } from "x402/types"

const rpcUrl = process.env.RPC_URL
const key = process.env.FACILITATOR_KEY
if (!rpcUrl || !key) throw new Error("RPC_URL and FACILITATOR_KEY are required")
baseSepolia.rpcUrls.default.http = [rpcUrl]

const client = createConnectedClient("base-sepolia")
const signer =
  process.env.SIGNER === "nonce-manager"
    ? createWalletClient({ chain: baseSepolia, transport: http(), account: privateKeyToAccount(key, { nonceManager }) }).extend(publicActions)
    : await createSigner("base-sepolia", key)

const app = express()
app.use(express.json())

app.get("/supported", (_req, res) => {
  res.json({ kinds: [{ x402Version: 1, scheme: "exact", network: "base-sepolia" }] })
})

app.post("/verify", async (req, res) => {
  try {
    const paymentRequirements = PaymentRequirementsSchema.parse(req.body.paymentRequirements)
    const paymentPayload = PaymentPayloadSchema.parse(req.body.paymentPayload)
    res.json(await verify(client, paymentPayload, paymentRequirements))
  } catch (error) {
    console.error("verify:", error instanceof Error ? error.message : String(error))
    res.status(400).json({ error: "Invalid request" })
  }
})

app.post("/settle", async (req, res) => {
  try {
    const paymentRequirements = PaymentRequirementsSchema.parse(req.body.paymentRequirements)
    const paymentPayload = PaymentPayloadSchema.parse(req.body.paymentPayload)
    res.json(await settle(signer, paymentPayload, paymentRequirements))
  } catch (error) {
    console.error("settle:", error instanceof Error ? error.message : String(error))
    res.status(400).json({ error: `Invalid request: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}` })
  }
})

const server = app.listen(0, "127.0.0.1", () => {
  const port = server.address().port
  if (process.send) process.send({ type: "listening", port })
  else console.log(`facilitator listening on http://127.0.0.1:${port}`)
})
server.keepAliveTimeout = 60_000

const shutdown = () => {
  server.close()
  server.closeAllConnections()
  setTimeout(() => process.exit(0), 500).unref()
}
process.on("disconnect", shutdown)
process.on("SIGTERM", shutdown)
process.on("SIGINT", shutdown)
