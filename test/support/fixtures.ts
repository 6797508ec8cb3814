// Request bodies for tests.
import type { PrivateKeyAccount } from "viem/accounts"
import { registrationTypedData } from "../../services/agents/registrationProof.js"

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

/**
 * A registration carrying `walletProof`: the agent wallet's EIP-712 signature over it, so that another wallet may pay
 * the fee. `signer` signs instead of the owner (a forged proof); `issuedAt` in ms (default now).
 */
export const withWalletProof = async (
  owner: PrivateKeyAccount,
  body: ReturnType<typeof registration>,
  options: { readonly signer?: PrivateKeyAccount; readonly issuedAt?: number } = {}
) => {
  const issuedAt = options.issuedAt ?? Date.now()
  const signature = await (options.signer ?? owner).signTypedData(registrationTypedData(body, issuedAt, 84532))
  return { ...body, walletProof: { signature, issuedAt } }
}
