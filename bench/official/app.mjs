// The official x402 resource server for `npm run bench:official`: express with `x402-express` `paymentMiddleware` (as
// its README shows it) on POST /execute, whose handler forwards the JSON body to the echo agent with fetch and returns
// the agent's JSON. The middleware verifies through the facilitator, runs the handler, settles through the facilitator
// (which answers after the receipt) and only then sends the buffered answer with X-PAYMENT-RESPONSE.
// Env: FACILITATOR_URL, AGENT_URL, PAY_TO, PRICE (atomic units), ASSET (token address; EIP-712 domain "USDC" "2").
// Plain JS: the root `tsc` must not see these packages (not installed in CI).
import express from "express"
import { paymentMiddleware } from "x402-express"

const env = (name) => {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is required`)
  return value
}
const agentUrl = env("AGENT_URL")

const app = express()
app.get("/health", (_req, res) => res.json({ ok: true }))
app.use(
  paymentMiddleware(
    env("PAY_TO"),
    {
      "POST /execute": {
        // The devnet's token is not the network's default USDC: an ERC-20 amount names it (as the README documents).
        price: { amount: env("PRICE"), asset: { address: env("ASSET"), decimals: 6, eip712: { name: "USDC", version: "2" } } },
        network: "base-sepolia",
        config: { description: "bench echo" }
      }
    },
    { url: env("FACILITATOR_URL") }
  )
)
app.use(express.json())
app.post("/execute", async (req, res) => {
  const reply = await fetch(agentUrl, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(req.body)
  })
  res.status(reply.status).json(await reply.json())
})

const server = app.listen(0, "127.0.0.1", () => {
  const port = server.address().port
  if (process.send) process.send({ type: "listening", port })
  else console.log(`official x402 app listening on http://127.0.0.1:${port}`)
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
