// Payers with smart-contract wallets: an EIP-3009 authorization signed by an ERC-1271 account (deployed) or an ERC-6492
// counterfactual account (deployed by its factory when the payment settles). Checked on the chain, after the local
// ECDSA check failed, so that plain-key payments cost nothing extra.
import { Config, Duration, Effect } from "effect"
import { type Hex, isAddressEqual, isErc6492Signature, parseErc6492Signature, type TypedDataDefinition } from "viem"
import { transferWithAuthorizationTypes } from "../devnet/usdcAbi.js"
import { PaymentRejected } from "./payment.js"
import { withSpan } from "../observability/span.js"

const address = /^0x[0-9a-fA-F]{40}$/

/**
 * X402_EIP6492_ALLOWED_FACTORIES: comma-separated factory addresses whose counterfactual accounts we accept and deploy
 * (as @x402/evm's facilitator `eip6492AllowedFactories`); empty (the default) accepts no counterfactual account.
 * X402_SMART_ACCOUNT_VERIFY_TIMEOUT_MS bounds the on-chain signature check (default 5 s).
 * X402_EIP6492_DEPLOY_SECONDS: what a counterfactual account's deployment and then its settlement are given (default 60):
 * its payment must arrive valid for PAYMENT_MIN_VALIDITY_SECONDS more than this, and its deployment is sent only while
 * the payment stays valid at least this long (docs/settlement.md).
 */
export const SmartAccountConfig = Config.all({
  allowedFactories: Config.string("X402_EIP6492_ALLOWED_FACTORIES").pipe(
    Config.withDefault(""),
    Config.map((s) => s.split(",").map((a) => a.trim()).filter((a) => a !== "")),
    Config.validate({
      message: "X402_EIP6492_ALLOWED_FACTORIES must be comma-separated addresses (0x followed by 40 hex characters)",
      validation: (list) => list.every((a) => address.test(a))
    }),
    Config.map((list) => list.map((a) => a.toLowerCase() as `0x${string}`))
  ),
  verifyTimeoutMs: Config.integer("X402_SMART_ACCOUNT_VERIFY_TIMEOUT_MS").pipe(
    Config.withDefault(5_000),
    Config.validate({ message: "X402_SMART_ACCOUNT_VERIFY_TIMEOUT_MS must be between 100 and 60000", validation: (n) => n >= 100 && n <= 60_000 })
  ),
  deploySeconds: Config.integer("X402_EIP6492_DEPLOY_SECONDS").pipe(
    Config.withDefault(60),
    Config.validate({ message: "X402_EIP6492_DEPLOY_SECONDS must be between 1 and 3600", validation: (n) => n >= 1 && n <= 3_600 })
  )
})
export type SmartAccountConfig = Config.Config.Success<typeof SmartAccountConfig>

/** An ERC-6492 signature's deployment: the factory and its calldata, and the account's own signature inside. */
export interface Erc6492Deployment {
  readonly factory: `0x${string}`
  readonly factoryData: Hex
  readonly innerSignature: Hex
}

const ZERO = "0x0000000000000000000000000000000000000000"

/** The deployment an ERC-6492-wrapped signature carries (none for any other signature). */
export const erc6492DeploymentOf = (signature: Hex): Erc6492Deployment | undefined => {
  if (!isErc6492Signature(signature)) return undefined
  try {
    const parsed = parseErc6492Signature(signature)
    if (parsed.address === undefined || parsed.data === undefined || isAddressEqual(parsed.address, ZERO)) return undefined
    return { factory: parsed.address, factoryData: parsed.data, innerSignature: parsed.signature }
  } catch {
    return undefined
  }
}

/** The signature the token checks: an ERC-6492 wrapper's inner signature (the account is deployed first), else itself. */
export const tokenSignatureOf = (signature: Hex): Hex => erc6492DeploymentOf(signature)?.innerSignature ?? signature

/**
 * Whether the token can take the signature through its (v, r, s) overload (and so through the SettlementBatcher): 65
 * bytes and no deployment to make first. USDC v2.2 checks either overload with ERC-1271 for a contract signer.
 */
export const settlesAsVrs = (signature: Hex): boolean => signature.length === 132 && erc6492DeploymentOf(signature) === undefined

export const isAllowedFactory = (config: SmartAccountConfig, factory: string) => config.allowedFactories.includes(factory.toLowerCase() as `0x${string}`)

const reject = (reason: "invalid_exact_evm_payload_signature" | "eip6492_factory_not_allowed" | "unexpected_verify_error", message: string, details?: Record<string, unknown>) =>
  new PaymentRejected({ reason, message, ...(details === undefined ? {} : { details }) })

const chainUnavailable = reject("unexpected_verify_error", "the chain could not check the smart account's signature; try again", { retryable: true })

type TransferTypedData = TypedDataDefinition<typeof transferWithAuthorizationTypes, "TransferWithAuthorization">

/** What the check reads from the chain (a viem public client is one). */
export interface SignatureReader {
  getCode(args: { readonly address: `0x${string}` }): Promise<Hex | undefined>
  verifyTypedData(args: TransferTypedData & { readonly address: `0x${string}`; readonly signature: Hex }): Promise<boolean>
}

/**
 * The on-chain check of a signature that is not the payer's own ECDSA signature: ERC-1271 `isValidSignature` when the
 * payer has code, the ERC-6492 universal validator (viem's deployless call: it simulates the factory, then asks the
 * account) when it has none and the signature names an allowed factory. Bounded by `verifyTimeoutMs`. Says whether the
 * account is counterfactual (the treasury deploys it before its payment settles).
 */
export const verifySmartAccountSignature = (
  reader: SignatureReader,
  config: SmartAccountConfig,
  input: { readonly payer: `0x${string}`; readonly typedData: TransferTypedData; readonly signature: Hex }
): Effect.Effect<{ readonly counterfactual: boolean }, PaymentRejected> =>
  Effect.gen(function* () {
    const deployment = erc6492DeploymentOf(input.signature)
    const code = yield* Effect.tryPromise(() => reader.getCode({ address: input.payer })).pipe(Effect.mapError(() => chainUnavailable))
    const deployed = code !== undefined && code !== "0x"
    if (!deployed && deployment === undefined) {
      return yield* reject("invalid_exact_evm_payload_signature", "the payment signature does not match its authorization")
    }
    if (!deployed && deployment !== undefined && !isAllowedFactory(config, deployment.factory)) {
      return yield* reject("eip6492_factory_not_allowed", "the payer's smart account is not deployed and its factory is not one we deploy accounts with", {
        factory: deployment.factory
      })
    }
    const valid = yield* Effect.tryPromise(() =>
      reader.verifyTypedData({ ...input.typedData, address: input.payer, signature: input.signature })
    ).pipe(Effect.mapError(() => chainUnavailable))
    if (!valid) return yield* reject("invalid_exact_evm_payload_signature", "the smart account does not accept the payment signature (ERC-1271/ERC-6492)")
    return { counterfactual: !deployed }
  }).pipe(
    Effect.timeoutFail({ duration: Duration.millis(config.verifyTimeoutMs), onTimeout: () => chainUnavailable }),
    withSpan("PaymentVerifier.smartAccount")
  )
