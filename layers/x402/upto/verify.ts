// Verification of an upto authorization BEFORE the agent runs, without spending gas: our terms first (the proxy as
// spender, our token, our treasury as receiver, our writer as facilitator, at least the call's maximum, valid now and
// long enough for the call and its settlement), then the chain (the Permit2 nonce unused, the payer's balance and
// Permit2 allowance cover the maximum), then @x402/evm's own upto facilitator verification driven with our public
// client and our writer's address: the Permit2 signature (ERC-1271 / ERC-6492 accounts included) and a simulated
// `settle` from our writer (an eth_call: nothing is sent).
import { type PaymentPayload, type PaymentRequirements } from "@x402/core/types"
import { toFacilitatorEvmSigner, uptoPermit2WitnessTypes } from "@x402/evm"
import { UptoEvmScheme } from "@x402/evm/upto/facilitator"
import { Effect } from "effect"
import { type Abi, erc20Abi, getAddress, type PublicClient, type Transport, type Chain as ViemChain } from "viem"
import { PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS } from "../channelContracts.js"
import { PaymentRejected, type UptoRejectionReason } from "../payment.js"
import { asOfficialUpto, type UptoPaymentPayloadV2 } from "./payload.js"

/** Permit2's unordered nonces: bit `nonce & 255` of word `nonce >> 8` of the owner's bitmap is set once used. */
const permit2NonceAbi = [{
  type: "function",
  name: "nonceBitmap",
  stateMutability: "view",
  inputs: [{ name: "owner", type: "address" }, { name: "wordPos", type: "uint256" }],
  outputs: [{ name: "", type: "uint256" }]
}] as const

export interface UptoVerifyInput {
  readonly decoded: UptoPaymentPayloadV2
  readonly maximum: bigint
  readonly terms: {
    readonly receiver: `0x${string}`
    readonly facilitator: `0x${string}`
    readonly token: `0x${string}`
    readonly publicClient: PublicClient<Transport, ViemChain>
  }
  /** Unix seconds. */
  readonly now: number
  /** What the authorization must still have: the agent's time and the settlement's. */
  readonly minValiditySeconds: number
}

export interface VerifiedUpto {
  readonly payer: `0x${string}`
  /** What the payer authorized (≥ the call's maximum). */
  readonly permitted: bigint
  readonly nonce: bigint
  readonly deadline: bigint
  readonly validAfter: bigint
  readonly signature: `0x${string}`
  /** The payer's token balance as the chain showed it: its unsettled payments are counted against it at reservation. */
  readonly balance: bigint
}

const refuse = (reason: UptoRejectionReason, message: string, details?: Record<string, unknown>) =>
  Effect.fail(new PaymentRejected({ reason, message, ...(details === undefined ? {} : { details }) }))

/** @x402/evm's reasons that we pass on as they are (another one reads as a failed simulation). */
const UPTO_REASONS: ReadonlyArray<UptoRejectionReason> = [
  "invalid_permit2_spender", "invalid_permit2_recipient_mismatch", "upto_facilitator_mismatch", "permit2_deadline_expired", "permit2_not_yet_valid",
  "permit2_amount_mismatch", "permit2_token_mismatch", "invalid_permit2_signature", "permit2_allowance_required", "permit2_insufficient_balance",
  "permit2_invalid_nonce", "permit2_simulation_failed"
]
const isUptoReason = (reason: string): reason is UptoRejectionReason => UPTO_REASONS.some((r) => r === reason)

const same = (a: string, b: string) => getAddress(a) === getAddress(b)

const isAbi = (abi: ReadonlyArray<unknown>): abi is Abi => abi.every((item) => typeof item === "object" && item !== null && "type" in item)

const isCaip2 = (network: string): network is `${string}:${string}` => /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/.test(network)

/** The Permit2 typed data the payer signed (what the package's verification asks the signer to check). */
const typedDataOf = (decoded: UptoPaymentPayloadV2, chainId: number) => {
  const auth = decoded.payload.permit2Authorization
  return {
    domain: { name: "Permit2", chainId, verifyingContract: PERMIT2_ADDRESS },
    types: uptoPermit2WitnessTypes,
    primaryType: "PermitWitnessTransferFrom",
    message: {
      permitted: { token: getAddress(auth.permitted.token), amount: BigInt(auth.permitted.amount) },
      spender: getAddress(auth.spender),
      nonce: BigInt(auth.nonce),
      deadline: BigInt(auth.deadline),
      witness: { to: getAddress(auth.witness.to), facilitator: getAddress(auth.witness.facilitator), validAfter: BigInt(auth.witness.validAfter) }
    }
  } as const
}

/**
 * @x402/evm's facilitator signer over our public client: its reads come from our writer's address; it can send nothing.
 * Its signature check is answered with viem over the typed definition of the very payload it verifies (the package's
 * signer type carries the typed data untyped).
 */
const readOnlySigner = (client: PublicClient<Transport, ViemChain>, facilitator: `0x${string}`, decoded: UptoPaymentPayloadV2) =>
  toFacilitatorEvmSigner({
    address: facilitator,
    readContract: ({ address, abi, functionName, args }) => {
      if (!isAbi(abi)) return Promise.reject(new Error("not an ABI"))
      return client.readContract({ address, abi, functionName, args: args ?? [], account: facilitator })
    },
    verifyTypedData: ({ address, signature, primaryType }) =>
      primaryType !== "PermitWitnessTransferFrom" || !same(address, decoded.payload.permit2Authorization.from)
        ? Promise.resolve(false)
        : client.verifyTypedData({ address, signature, ...typedDataOf(decoded, client.chain.id) }),
    writeContract: () => Promise.reject(new Error("upto verification sends nothing")),
    sendTransaction: () => Promise.reject(new Error("upto verification sends nothing")),
    waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
    getCode: (args) => client.getCode(args)
  })

export const verifyUpto = (input: UptoVerifyInput): Effect.Effect<VerifiedUpto, PaymentRejected> =>
  Effect.gen(function* () {
    const { decoded, terms, maximum, now } = input
    const auth = decoded.payload.permit2Authorization
    const permitted = BigInt(auth.permitted.amount)
    const deadline = BigInt(auth.deadline)
    const validAfter = BigInt(auth.witness.validAfter)
    if (!same(auth.spender, UPTO_PERMIT2_PROXY_ADDRESS)) return yield* refuse("invalid_permit2_spender", `the Permit2 spender must be the x402UptoPermit2Proxy ${UPTO_PERMIT2_PROXY_ADDRESS}`)
    if (!same(auth.permitted.token, terms.token)) return yield* refuse("permit2_token_mismatch", `the authorization must permit USDC ${terms.token}`)
    if (!same(auth.witness.to, terms.receiver)) return yield* refuse("invalid_permit2_recipient_mismatch", `the witness must name our treasury ${terms.receiver} as receiver`)
    if (!same(auth.witness.facilitator, terms.facilitator)) {
      return yield* refuse("upto_facilitator_mismatch", `the witness must name our facilitator ${terms.facilitator} (extra.facilitatorAddress)`)
    }
    if (permitted < maximum) {
      return yield* refuse("permit2_amount_mismatch", `the authorization permits ${permitted}, below this call's maximum ${maximum}`, { maximum: maximum.toString() })
    }
    if (validAfter > BigInt(now)) return yield* refuse("permit2_not_yet_valid", "the authorization is not valid yet (witness.validAfter)")
    if (deadline < BigInt(now + input.minValiditySeconds)) {
      return yield* refuse("permit2_deadline_expired", `the authorization's deadline must leave at least ${input.minValiditySeconds} s for the call and its settlement`, {
        deadline: auth.deadline,
        minValiditySeconds: input.minValiditySeconds
      })
    }

    // The chain: the nonce, the balance and the allowance, read together.
    const payer = getAddress(auth.from)
    const nonce = BigInt(auth.nonce)
    const reads = yield* Effect.tryPromise(() =>
      Promise.all([
        terms.publicClient.readContract({ address: PERMIT2_ADDRESS, abi: permit2NonceAbi, functionName: "nonceBitmap", args: [payer, nonce >> 8n] }),
        terms.publicClient.readContract({ address: terms.token, abi: erc20Abi, functionName: "balanceOf", args: [payer] }),
        terms.publicClient.readContract({ address: terms.token, abi: erc20Abi, functionName: "allowance", args: [payer, PERMIT2_ADDRESS] })
      ])
    ).pipe(Effect.mapError((e) => new PaymentRejected({ reason: "unexpected_verify_error", message: `the chain could not be read to verify the authorization: ${String(e.error).slice(0, 200)}` })))
    const [bitmap, balance, allowance] = reads
    if ((bitmap & (1n << (nonce & 255n))) !== 0n) return yield* refuse("permit2_invalid_nonce", "this Permit2 nonce is already used on chain")
    if (balance < maximum) return yield* refuse("permit2_insufficient_balance", `the payer's USDC balance does not cover the maximum ${maximum}`)
    if (allowance < maximum) {
      return yield* refuse("permit2_allowance_required", `the payer has not approved Permit2 (${PERMIT2_ADDRESS}) for at least ${maximum} USDC: approve it once`)
    }

    // The package's own verification: the signature, and settle simulated from our writer for what was permitted.
    const network = decoded.accepted.network
    if (!isCaip2(network)) return yield* Effect.fail(new PaymentRejected({ reason: "invalid_network", message: `${network} is not a CAIP-2 network` }))
    const requirements: PaymentRequirements = { ...decoded.accepted, network, amount: auth.permitted.amount, payTo: terms.receiver, extra: { ...decoded.accepted.extra } }
    const payload: PaymentPayload = { x402Version: 2, accepted: requirements, payload: { ...asOfficialUpto(decoded.payload) } }
    const official = yield* Effect.tryPromise(() => new UptoEvmScheme(readOnlySigner(terms.publicClient, terms.facilitator, decoded)).verify(payload, requirements)).pipe(
      Effect.mapError((e) => new PaymentRejected({ reason: "unexpected_verify_error", message: `the authorization could not be verified: ${String(e.error).slice(0, 200)}` }))
    )
    if (!official.isValid) {
      const reason = official.invalidReason ?? "permit2_simulation_failed"
      return yield* refuse(isUptoReason(reason) ? reason : "permit2_simulation_failed", `the authorization does not verify (${reason})`, { invalidReason: reason })
    }
    return { payer: getAddress(payer), permitted, nonce, deadline, validAfter, signature: decoded.payload.signature, balance } satisfies VerifiedUpto
  })
