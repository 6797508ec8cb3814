import { describe, expect, it } from "vitest"
import { type Hex, keccak256, parseTransaction, recoverTransactionAddress, type TransactionSerializable } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { DEV_PRIVATE_KEYS } from "../../layers/devnet/anvil.js"
import { signingImplementation, treasuryAccount } from "../../layers/nativeAccount.js"

const keys: ReadonlyArray<Hex> = [DEV_PRIVATE_KEYS[0] ?? generatePrivateKey(), ...Array.from({ length: 5 }, () => generatePrivateKey())]
const to = "0x036CbD53842c5426634e7929541eC2318f3dCF7e" as const

const transactions = (n: number): ReadonlyArray<TransactionSerializable> => [
  {
    type: "eip1559",
    chainId: 84532,
    nonce: n,
    to,
    data: keccak256(new Uint8Array([n])),
    value: 0n,
    gas: 150_000n + BigInt(n),
    maxFeePerGas: 2_000_000_000n + BigInt(n),
    maxPriorityFeePerGas: 1_000_000n
  },
  { type: "eip1559", chainId: 1, nonce: 0, to, value: 0n, gas: 21_000n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n },
  { type: "legacy", chainId: 84532, nonce: n, to, value: BigInt(n), gas: 21_000n, gasPrice: 1_000_000_000n },
  { type: "legacy", nonce: n, to, value: 0n, gas: 21_000n, gasPrice: 7n, data: "0xdeadbeef" },
  { type: "eip2930", chainId: 31337, nonce: n, to, value: 0n, gas: 50_000n, gasPrice: 3n, accessList: [] }
]

describe("treasuryAccount (treasury transactions signed by libsecp256k1)", () => {
  const prebuilt = ["linux-x64", "darwin-arm64", "win32-x64"].includes(`${process.platform}-${process.arch}`)
  it.runIf(prebuilt)("loads the prebuilt libsecp256k1 binding on this platform", () => {
    expect(signingImplementation).toBe("native")
  })

  it("signs every transaction type byte for byte as viem's own account does, for the same key", async () => {
    for (const key of keys) {
      const viemAccount = privateKeyToAccount(key)
      const account = treasuryAccount(key)
      expect(account.address).toBe(viemAccount.address)
      expect(account.type).toBe("local")
      for (let n = 0; n < 8; n++) {
        for (const tx of transactions(n)) {
          const ours = await account.signTransaction(tx)
          expect(ours).toBe(await viemAccount.signTransaction(tx))
          expect(await recoverTransactionAddress({ serializedTransaction: ours as Parameters<typeof recoverTransactionAddress>[0]["serializedTransaction"] })).toBe(viemAccount.address)
          expect(parseTransaction(ours).nonce).toBe(tx.nonce)
        }
        const hash = keccak256(new Uint8Array([n, 1]))
        expect(await account.sign({ hash })).toBe(await viemAccount.sign({ hash }))
      }
    }
  })

  it("keeps viem's message and typed-data signing and its nonce manager", async () => {
    const key = keys[1] ?? generatePrivateKey()
    const nonceManager = { consume: async () => 0, increment: () => {}, get: async () => 0, reset: () => {} }
    const account = treasuryAccount(key, { nonceManager })
    expect(account.nonceManager).toBe(nonceManager)
    expect(await account.signMessage({ message: "hello" })).toBe(await privateKeyToAccount(key).signMessage({ message: "hello" }))
  })
})
