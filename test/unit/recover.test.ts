import { describe, expect, it } from "vitest"
import { domainSeparator, type Hex, hashTypedData, keccak256, verifyTypedData } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { transferWithAuthorizationTypes } from "../../layers/devnet/usdcAbi.js"
import { recoveryImplementation, signedByKey, transferAuthorizationDigest } from "../../layers/x402/recover.js"

const payer = privateKeyToAccount(generatePrivateKey())
const other = privateKeyToAccount(generatePrivateKey())
const domain = { name: "USDC", version: "2", chainId: 84532, verifyingContract: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" } as const
const typedData = (n: number) => ({
  domain,
  types: transferWithAuthorizationTypes,
  primaryType: "TransferWithAuthorization" as const,
  message: { from: payer.address, to: other.address, value: 11_000n, validAfter: 0n, validBefore: 2n ** 40n, nonce: keccak256(new Uint8Array([n])) }
})

describe("signedByKey (the paid call's one signature recovery)", () => {
  const prebuilt = ["linux-x64", "darwin-arm64", "win32-x64"].includes(`${process.platform}-${process.arch}`)
  it.runIf(prebuilt)("loads the prebuilt libsecp256k1 binding on this platform", () => {
    expect(recoveryImplementation).toBe("native")
  })

  it("agrees with viem's verifyTypedData on good, foreign, tampered and malformed signatures", async () => {
    for (let n = 0; n < 20; n++) {
      const data = typedData(n)
      const signature = await payer.signTypedData(data)
      const v = parseInt(signature.slice(130), 16)
      const low = `${signature.slice(0, 130)}${(v - 27).toString(16).padStart(2, "0")}` as Hex
      const tampered = `${signature.slice(0, 10)}${signature[10] === "0" ? "1" : "0"}${signature.slice(11)}` as Hex
      const cases: Array<[Hex, `0x${string}`]> = [
        [signature, payer.address],
        [low, payer.address],
        [signature, other.address],
        [tampered, payer.address],
        [`${signature.slice(0, 130)}1d` as Hex, payer.address],
        [`0x${"00".repeat(65)}` as Hex, payer.address],
        [`0x${"ff".repeat(65)}` as Hex, payer.address],
        [signature.slice(0, 130) as Hex, payer.address]
      ]
      for (const [sig, address] of cases) {
        const expected = sig.length === 132 && (await verifyTypedData({ ...data, address, signature: sig }).catch(() => false))
        expect(await signedByKey(data, address, sig)).toBe(expected)
      }
      expect(await signedByKey(data, payer.address, signature)).toBe(true)
      expect(await signedByKey(data, payer.address, low)).toBe(true)
      expect(await signedByKey({ ...data, message: { ...data.message, value: 11_001n } }, payer.address, signature)).toBe(false)
    }
  })
})

describe("transferAuthorizationDigest (the EIP-712 digest written out)", () => {
  const domains = [domain, { name: "USD Coin", version: "1", chainId: 1, verifyingContract: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48" }] as const
  it("equals viem's hashTypedData for the same domain and message", () => {
    for (const d of domains) {
      const separator = domainSeparator({ domain: d })
      for (let n = 0; n < 30; n++) {
        const message = {
          from: payer.address,
          to: other.address,
          value: BigInt(n) * 1_000_003n,
          validAfter: n % 2 === 0 ? 0n : BigInt(n) ** 20n,
          validBefore: n === 29 ? 2n ** 256n - 1n : 2n ** 40n + BigInt(n),
          nonce: keccak256(new Uint8Array([n, 7]))
        }
        expect(transferAuthorizationDigest(separator, message)).toBe(
          hashTypedData({ domain: d, types: transferWithAuthorizationTypes, primaryType: "TransferWithAuthorization", message })
        )
      }
    }
  })

  it("has no digest for a message the type cannot hold (viem's throws)", () => {
    const separator = domainSeparator({ domain })
    const message = { from: payer.address, to: other.address, value: 1n, validAfter: 0n, validBefore: 1n, nonce: keccak256("0x01") }
    expect(transferAuthorizationDigest(separator, { ...message, value: 2n ** 256n })).toBeUndefined()
    expect(transferAuthorizationDigest(separator, { ...message, validAfter: -1n })).toBeUndefined()
    expect(transferAuthorizationDigest(separator, { ...message, nonce: "0x01" })).toBeUndefined()
  })
})

describe("signedByKey with the written-out digest", () => {
  it("gives the same answers as with viem's digest", async () => {
    const separator = domainSeparator({ domain })
    for (let n = 0; n < 10; n++) {
      const data = typedData(n)
      const signature = await payer.signTypedData(data)
      const digest = transferAuthorizationDigest(separator, data.message)
      expect(await signedByKey(data, payer.address, signature, digest)).toBe(true)
      expect(await signedByKey(data, other.address, signature, digest)).toBe(false)
      const tampered = transferAuthorizationDigest(separator, { ...data.message, value: 11_001n })
      expect(await signedByKey(data, payer.address, signature, tampered)).toBe(false)
    }
  })
})
