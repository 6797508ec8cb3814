import { describe, expect, it } from "vitest"
import { type Hex, keccak256, verifyTypedData } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { transferWithAuthorizationTypes } from "../../layers/devnet/usdcAbi.js"
import { recoveryImplementation, signedByKey } from "../../layers/x402/recover.js"

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
