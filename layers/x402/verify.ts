// Verification of an x402 exact payment against a price, for either wire version: the version's own envelope (v1
// scheme/network, v2 `accepted` requirements and extensions), then what both share, checked before our database is
// touched (recipient, amount, validity window, EIP-3009 signature: local ECDSA first, a smart account's on the chain),
// then the chain (authorization unused, funds).
import { Clock, Effect, Either } from "effect"
import { decodeFunctionResult, encodeFunctionData, domainSeparator, getAddress, type Hex, isAddressEqual, isHex } from "viem"
import type { AppConfigShape } from "../Config.js"
import type { ChainShape } from "../Chain.js"
import { transferWithAuthorizationTypes, usdcAbi } from "../devnet/usdcAbi.js"
import type { PaymentCredential } from "./credential.js"
import { decodePaymentHeader } from "./header.js"
import { type ExactEvmPayload, PaymentRejected, type Presentation, type RejectionReason, sha256, type VerifiedPayment } from "./payment.js"
import { paymentIdentifierOf } from "./paymentIdentifier.js"
import { signedByKey, transferAuthorizationDigest } from "./recover.js"
import { BatchRefused } from "../rpcBatch.js"
import { type SmartAccountConfig, verifySmartAccountSignature } from "./smartAccount.js"
import { caip2Of, decodePaymentSignatureHeader } from "./v2.js"
import { withSpan } from "../observability/span.js"

/** A verified payment and how it was presented. */
export interface Verified {
  readonly payment: VerifiedPayment
  readonly presentation: Presentation
}

/** `verify(credential, amount)` for one chain and configuration; `amount` is the exact price. */
export const makeVerify = (
  chain: ChainShape,
  config: Pick<AppConfigShape, "paymentMinValiditySeconds">,
  smartAccounts: SmartAccountConfig
) => {
  const { publicClient } = chain
  const caip2 = caip2Of(chain.chainId)
  const domain = {
    name: chain.usdc.name,
    version: chain.usdc.version,
    chainId: chain.chainId,
    verifyingContract: chain.usdc.address
  } as const

  const separator = domainSeparator({ domain })
  /** The authorization's EIP-712 digest, written out (recover.ts); viem's generic path when X402_FAST_DIGEST=0. */
  const digestOf = process.env["X402_FAST_DIGEST"] === "0"
    ? () => undefined
    : (message: Parameters<typeof transferAuthorizationDigest>[1]) => transferAuthorizationDigest(separator, message)

  const reject = (reason: RejectionReason, message: string, details?: Record<string, unknown>) =>
    Effect.fail(new PaymentRejected({ reason, message, ...(details === undefined ? {} : { details }) }))

  /** The x402 v1 envelope: version, scheme and v1 network name. */
  const openV1 = (raw: string) =>
    Effect.gen(function* () {
      const payload = yield* decodePaymentHeader(raw)
      if (payload.x402Version !== 1) {
        return yield* reject("invalid_x402_version", "X-PAYMENT carries x402 v1 payloads (send v2 in PAYMENT-SIGNATURE)", { x402Version: payload.x402Version })
      }
      if (payload.scheme !== "exact") return yield* reject("unsupported_scheme", "only the \"exact\" scheme is supported")
      if (payload.network !== chain.network) {
        return yield* reject("invalid_network", `payments are taken on ${chain.network}`, { network: payload.network, expected: chain.network })
      }
      return { exact: payload.payload, network: chain.network, paymentIdentifier: undefined }
    })

  /** The x402 v2 envelope: the requirements the payer accepted must be ours (scheme, CAIP-2 network, asset, domain, price). */
  const openV2 = (raw: string, amount: bigint) =>
    Effect.gen(function* () {
      const payload = yield* decodePaymentSignatureHeader(raw)
      const accepted = payload.accepted
      if (accepted.scheme !== "exact") return yield* reject("unsupported_scheme", "only the \"exact\" scheme is supported")
      if (accepted.network !== caip2) {
        return yield* reject("invalid_network", `payments are taken on ${caip2}`, { network: accepted.network, expected: caip2 })
      }
      const extra = accepted.extra ?? {}
      if (!sameAddress(accepted.asset, chain.usdc.address) || extra["name"] !== chain.usdc.name || extra["version"] !== chain.usdc.version) {
        return yield* reject("invalid_payment_requirements", "the accepted requirements name another asset or EIP-712 domain than the one offered", {
          asset: accepted.asset,
          expected: { asset: chain.usdc.address, name: chain.usdc.name, version: chain.usdc.version }
        })
      }
      if (!sameAddress(accepted.payTo, chain.treasury)) {
        return yield* reject("invalid_exact_evm_payload_recipient_mismatch", "the accepted requirements pay someone else than the platform treasury", {
          payTo: accepted.payTo,
          expected: chain.treasury
        })
      }
      if (accepted.amount !== amount.toString()) {
        return yield* reject("invalid_exact_evm_payload_authorization_value", "the accepted requirements name another amount than the price", {
          amount: accepted.amount,
          expected: amount.toString()
        })
      }
      const paymentIdentifier = paymentIdentifierOf(payload.extensions)
      if (Either.isLeft(paymentIdentifier)) return yield* paymentIdentifier.left
      return { exact: payload.payload, network: caip2, paymentIdentifier: paymentIdentifier.right }
    })

  /** Through viem, one request per read: where the provider takes no batches (or CHAIN_READ_BATCH=0). */
  const tokenStateByViem = (payer: `0x${string}`, nonce: Hex) =>
    Promise.all([
      publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "authorizationState", args: [payer, nonce] }),
      publicClient.readContract({ address: chain.usdc.address, abi: usdcAbi, functionName: "balanceOf", args: [payer] })
    ])

  let batches = process.env["CHAIN_READ_BATCH"] !== "0"
  /**
   * Whether the authorization was used, and the payer's balance: both reads as one JSON-RPC batch in one request
   * (layers/rpcBatch.ts); a provider that refuses batches is read through viem from then on.
   */
  const tokenState = async (payer: `0x${string}`, nonce: Hex): Promise<readonly [boolean, bigint]> => {
    if (!batches) return tokenStateByViem(payer, nonce)
    const call = (data: Hex) => ({ method: "eth_call", params: [{ to: chain.usdc.address, data }, "latest"] })
    let results: ReadonlyArray<unknown>
    try {
      results = await chain.rpcBatch([
        call(encodeFunctionData({ abi: usdcAbi, functionName: "authorizationState", args: [payer, nonce] })),
        call(encodeFunctionData({ abi: usdcAbi, functionName: "balanceOf", args: [payer] }))
      ])
    } catch (error) {
      if (!(error instanceof BatchRefused)) throw error
      batches = false
      return tokenStateByViem(payer, nonce)
    }
    const [usedData, balanceData] = results
    if (!isHex(usedData) || !isHex(balanceData)) throw new Error("eth_call answered no data")
    return [
      decodeFunctionResult({ abi: usdcAbi, functionName: "authorizationState", data: usedData }),
      decodeFunctionResult({ abi: usdcAbi, functionName: "balanceOf", data: balanceData })
    ] as const
  }

  /** What both versions share: the authorization itself against the price, the clock, the signature and the chain. */
  const checkAuthorization = (exact: ExactEvmPayload, amount: bigint, headerSha256: string) =>
    Effect.gen(function* () {
      const auth = exact.authorization
      const payer = getAddress(auth.from)
      if (!isAddressEqual(getAddress(auth.to), chain.treasury)) {
        return yield* reject("invalid_exact_evm_payload_recipient_mismatch", "the payment is not made out to the platform treasury", {
          to: auth.to,
          expected: chain.treasury
        })
      }
      const value = BigInt(auth.value)
      if (value !== amount) {
        return yield* reject(
          "invalid_exact_evm_payload_authorization_value",
          value < amount ? "the payment is less than the price" : "the payment does not equal the price",
          { value: auth.value, expected: amount.toString() }
        )
      }
      const now = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
      const validAfter = BigInt(auth.validAfter)
      const validBefore = BigInt(auth.validBefore)
      if (validAfter >= now) {
        return yield* reject("invalid_exact_evm_payload_authorization_valid_after", "the payment is not valid yet", {
          validAfter: auth.validAfter,
          now: now.toString()
        })
      }
      if (validBefore <= now + BigInt(config.paymentMinValiditySeconds)) {
        return yield* reject("invalid_exact_evm_payload_authorization_valid_before", "the payment has expired or expires too soon to settle", {
          validBefore: auth.validBefore,
          now: now.toString(),
          minValiditySeconds: config.paymentMinValiditySeconds
        })
      }
      const signature = exact.signature as Hex
      const nonce = auth.nonce.toLowerCase() as Hex
      const message = { from: payer, to: getAddress(auth.to), value, validAfter, validBefore, nonce }
      const typedData = { domain, types: transferWithAuthorizationTypes, primaryType: "TransferWithAuthorization", message } as const
      // The payer's own key: checked here, no chain call (a plain-key payment costs nothing more). Anything else may be
      // a smart account's signature: the chain decides (ERC-1271, or ERC-6492 for an account not deployed yet).
      const byKey = yield* Effect.promise(() => signedByKey(typedData, payer, signature, digestOf(message)))
      if (!byKey) {
        const { counterfactual } = yield* verifySmartAccountSignature(publicClient, smartAccounts, { payer, typedData, signature })
        // A counterfactual account's payment waits for a deployment before its settlement: its window must hold both.
        const needed = BigInt(config.paymentMinValiditySeconds + smartAccounts.deploySeconds)
        if (counterfactual && validBefore <= now + needed) {
          return yield* reject("invalid_exact_evm_payload_authorization_valid_before", "the payment expires too soon to deploy the payer's smart account and then settle", {
            validBefore: auth.validBefore,
            now: now.toString(),
            minValiditySeconds: Number(needed)
          })
        }
      }
      const [used, balance] = yield* Effect.tryPromise(() => tokenState(payer, nonce)).pipe(
        Effect.mapError(() =>
          new PaymentRejected({ reason: "unexpected_verify_error", message: "the chain could not be queried; try again", details: { retryable: true } })
        )
      )
      if (used) return yield* reject("payment_already_used", "this payment authorization was already used")
      if (balance < value) {
        return yield* reject("insufficient_funds", "the payer's USDC balance does not cover the payment", {
          balance: balance.toString(),
          required: value.toString()
        })
      }
      return {
        payer: payer.toLowerCase() as `0x${string}`,
        payTo: chain.treasury,
        asset: chain.usdc.address,
        network: chain.network,
        amount: value,
        nonce,
        validAfter,
        validBefore,
        signature,
        headerSha256,
        balance
      } satisfies VerifiedPayment
    })

  /** Everything that can be checked without touching our database, for a credential of either version. */
  const verifyCredential = (credential: PaymentCredential, amount: bigint): Effect.Effect<Verified, PaymentRejected> =>
    Effect.gen(function* () {
      const handle = credential.raw.trim()
      const opened = credential.version === 1 ? yield* openV1(handle) : yield* openV2(handle, amount)
      const payment = yield* checkAuthorization(opened.exact, amount, sha256(handle))
      return {
        payment,
        presentation: { version: credential.version, handle, network: opened.network, paymentIdentifier: opened.paymentIdentifier }
      } satisfies Verified
    }).pipe(withSpan("PaymentVerifier.verify", { attributes: { "x402.version": credential.version } }))

  /** An X-PAYMENT (v1) header against a price (kept for callers that only speak v1, such as the paywall bench). */
  const verify = (header: string, amount: bigint): Effect.Effect<VerifiedPayment, PaymentRejected> =>
    Effect.map(verifyCredential({ version: 1, raw: header }, amount), (v) => v.payment)

  return { verify, verifyCredential, caip2 } as const
}

const sameAddress = (a: string, b: string) => /^0x[0-9a-fA-F]{40}$/.test(a) && a.toLowerCase() === b.toLowerCase()
