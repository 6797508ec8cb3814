// Request bodies for tests.
import type { PrivateKeyAccount } from "viem/accounts"

export const capability = (overrides: Record<string, unknown> = {}) => ({
  id: "summarize",
  name: "Summarize text",
  description: "Summarizes the given text",
  inputSchema: { type: "object", properties: { text: { type: "string", minLength: 1 } }, required: ["text"] },
  outputSchema: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
  pricing: { model: "per-request", basePrice: "0.01", currency: "USDC" },
  ...overrides
})

export const registration = (wallet: PrivateKeyAccount | string, overrides: Record<string, unknown> = {}) => ({
  wallet: typeof wallet === "string" ? wallet : wallet.address,
  name: "Summarizer",
  description: "Summarizes documents",
  tags: ["nlp", "text"],
  capabilities: [capability()],
  endpoints: { execution: "http://127.0.0.1:9/execute" },
  metadata: { owner: "tests" },
  ...overrides
})
