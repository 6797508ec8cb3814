// Smart-account signatures without a chain: how each shape is settled (v, r, s batched, or the bytes overload alone,
// ERC-6492 unwrapped), and the on-chain check's refusals and its time bound, against a stand-in reader.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Fiber, TestClock } from "effect"
import { decodeFunctionData, type Hex, serializeErc6492Signature } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { transferWithAuthorizationTypes, usdcAbi } from "../../layers/devnet/usdcAbi.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { erc6492DeploymentOf, type SignatureReader, settlesAsVrs, tokenSignatureOf, verifySmartAccountSignature } from "../../layers/x402/smartAccount.js"
import { singleCalldata } from "../../services/payments/chainOutcome.js"

type Address = `0x${string}`
const factory: Address = "0x4444444444444444444444444444444444444444"
const account: Address = "0x5555555555555555555555555555555555555555"
const treasury: Address = "0x3333333333333333333333333333333333333333"
const factoryData: Hex = "0xdeadbeef"
const owner = privateKeyToAccount(generatePrivateKey())

const typedData = {
  domain: { name: "USDC", version: "2", chainId: 84532, verifyingContract: "0x1111111111111111111111111111111111111111" },
  types: transferWithAuthorizationTypes,
  primaryType: "TransferWithAuthorization",
  message: { from: account, to: treasury, value: 1n, validAfter: 0n, validBefore: 10n, nonce: `0x${"01".repeat(32)}` }
} as const

const ownerSignature = () => owner.sign({ hash: `0x${"ab".repeat(32)}` })
const wrapped = (inner: Hex) => serializeErc6492Signature({ address: factory, data: factoryData, signature: inner })

const payment = (signature: Hex): VerifiedPayment => ({
  payer: account,
  payTo: treasury,
  asset: typedData.domain.verifyingContract,
  network: "base-sepolia",
  amount: 1n,
  nonce: typedData.message.nonce,
  validAfter: 0n,
  validBefore: 10n,
  signature,
  headerSha256: "x"
})

/** A chain that answers `code` for the payer and `valid` for the signature, counting the signature checks. */
const reader = (code: Hex | undefined, valid: () => Promise<boolean>) => {
  const calls = { verify: 0 }
  const r: SignatureReader = {
    getCode: () => Promise.resolve(code),
    verifyTypedData: () => {
      calls.verify++
      return valid()
    }
  }
  return { reader: r, calls }
}

const config = { allowedFactories: [factory.toLowerCase() as Address], verifyTimeoutMs: 5_000, deploySeconds: 60 }
const check = (r: SignatureReader, signature: Hex, allowed = config) =>
  verifySmartAccountSignature(r, allowed, { payer: account, typedData, signature })
const reasonOf = <A>(result: Either.Either<A, { readonly reason: string }>) => (Either.isLeft(result) ? result.left.reason : "accepted")

describe("how a smart account's signature is settled", () => {
  it("a 65-byte signature goes through the (v, r, s) overload (batchable); others through the bytes overload", async () => {
    const sig = await ownerSignature()
    expect(settlesAsVrs(sig)).toBe(true)
    expect(settlesAsVrs(`0x00${sig.slice(2)}`)).toBe(false)
    expect(settlesAsVrs(wrapped(sig))).toBe(false)
    const vrs = decodeFunctionData({ abi: usdcAbi, data: singleCalldata(payment(sig)) })
    expect(vrs.args).toHaveLength(9)
    const prefixed: Hex = `0x00${sig.slice(2)}`
    expect(decodeFunctionData({ abi: usdcAbi, data: singleCalldata(payment(prefixed)) }).args?.[6]).toBe(prefixed)
  })

  it("an ERC-6492 signature is unwrapped for the token: its factory call is made before, never sent to the token", async () => {
    const sig = await ownerSignature()
    expect(erc6492DeploymentOf(wrapped(sig))).toEqual({ factory, factoryData, innerSignature: sig })
    expect(erc6492DeploymentOf(sig)).toBeUndefined()
    expect(tokenSignatureOf(wrapped(sig))).toBe(sig)
    const args = decodeFunctionData({ abi: usdcAbi, data: singleCalldata(payment(wrapped(sig))) }).args
    expect(args).toHaveLength(7)
    expect(args?.[6]).toBe(sig)
  })
})

describe("the on-chain check of a smart account's signature", () => {
  it.effect("a payer without code and without an ERC-6492 deployment is refused without a signature call", () =>
    Effect.gen(function* () {
      const { reader: r, calls } = reader("0x", () => Promise.resolve(true))
      expect(reasonOf(yield* Effect.either(check(r, yield* Effect.promise(ownerSignature))))).toBe("invalid_exact_evm_payload_signature")
      expect(calls.verify).toBe(0)
    }))

  it.effect("a counterfactual account whose factory is not allowed is refused without a signature call", () =>
    Effect.gen(function* () {
      const { reader: r, calls } = reader(undefined, () => Promise.resolve(true))
      const sig = wrapped(yield* Effect.promise(ownerSignature))
      expect(reasonOf(yield* Effect.either(check(r, sig, { ...config, allowedFactories: [] })))).toBe("eip6492_factory_not_allowed")
      expect(calls.verify).toBe(0)
      expect(reasonOf(yield* Effect.either(check(r, sig)))).toBe("accepted")
      expect(calls.verify).toBe(1)
    }))

  it.effect("a deployed account that rejects the signature is refused; one that accepts it passes", () =>
    Effect.gen(function* () {
      const sig = yield* Effect.promise(ownerSignature)
      expect(reasonOf(yield* Effect.either(check(reader("0x6000", () => Promise.resolve(false)).reader, sig)))).toBe("invalid_exact_evm_payload_signature")
      expect(reasonOf(yield* Effect.either(check(reader("0x6000", () => Promise.resolve(true)).reader, sig)))).toBe("accepted")
    }))

  it.effect("a chain that fails or does not answer is a retryable unexpected_verify_error, bounded by the timeout", () =>
    Effect.gen(function* () {
      const sig = yield* Effect.promise(ownerSignature)
      const failing = yield* Effect.either(check(reader("0x6000", () => Promise.reject(new Error("rpc down"))).reader, sig))
      expect(reasonOf(failing)).toBe("unexpected_verify_error")
      const hanging = yield* Effect.fork(Effect.either(check(reader("0x6000", () => new Promise<boolean>(() => {})).reader, sig)))
      yield* TestClock.adjust(5_000)
      const result = yield* Fiber.join(hanging)
      expect(reasonOf(result)).toBe("unexpected_verify_error")
      expect(Either.isLeft(result) ? result.left.details : undefined).toEqual({ retryable: true })
    }))
})
