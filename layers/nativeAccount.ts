// The treasury's signing account: viem's private-key account whose hash signatures (transactions included) go through
// libsecp256k1 (the `secp256k1` package's prebuilt binding, as signature recovery does: layers/x402/recover.ts) instead of
// viem's pure-JS @noble/curves. Both sign deterministically (RFC 6979, low S, no extra entropy), so the bytes are the same;
// the binding takes ~0.05 ms a signature against ~1.5-2 ms on this machine's cores, and a c=1 paid call signs one
// settlement. Where the binding does not load (or TREASURY_NATIVE_SIGNING=0), viem's own account is returned unchanged.
import { loadSecp256k1Binding, type Secp256k1Binding } from "./secp256k1Binding.js"
import {
  bytesToHex,
  type Hex,
  hexToBytes,
  keccak256,
  type NonceManager,
  type PrivateKeyAccount,
  serializeSignature,
  serializeTransaction,
  type SerializeTransactionFn,
  type Signature,
  type TransactionSerializable
} from "viem"
import { privateKeyToAccount } from "viem/accounts"

type Binding = Secp256k1Binding

const binding = loadSecp256k1Binding("TREASURY_NATIVE_SIGNING")

/** Which implementation signs treasury transactions in this process ("native" or "js"). */
export const signingImplementation: "native" | "js" = binding === undefined ? "js" : "native"

/** A 32-byte hash signed as viem's `sign` returns it (r, s, v 27/28, yParity). */
const signHash = (native: Binding, key: Uint8Array, hash: Hex): Signature => {
  const { signature, recid } = native.ecdsaSign(hexToBytes(hash), key)
  const yParity = recid & 1
  return {
    r: bytesToHex(signature.subarray(0, 32)),
    s: bytesToHex(signature.subarray(32, 64)),
    v: yParity === 1 ? 28n : 27n,
    yParity
  }
}

/**
 * `privateKeyToAccount(key, { nonceManager })` with native `sign` and `signTransaction` (viem's serializer, the hash
 * signed by the binding, as viem's own `signTransaction` does it); messages and typed data stay viem's.
 */
export const treasuryAccount = (privateKey: Hex, options: { readonly nonceManager?: NonceManager } = {}): PrivateKeyAccount => {
  const account = privateKeyToAccount(privateKey, options.nonceManager === undefined ? {} : { nonceManager: options.nonceManager })
  if (binding === undefined) return account
  const native = binding
  const key = hexToBytes(privateKey)
  const signTransaction = async <T extends TransactionSerializable>(
    transaction: T,
    { serializer = serializeTransaction as SerializeTransactionFn<T> }: { serializer?: SerializeTransactionFn<T> } = {}
  ) => {
    // EIP-4844 signs the payload without its sidecars: not a treasury transaction, viem's path keeps that rule.
    if (transaction.type === "eip4844") return account.signTransaction(transaction, { serializer })
    const signature = signHash(native, key, keccak256(await serializer(transaction)))
    return serializer(transaction, signature)
  }
  return {
    ...account,
    sign: async ({ hash }) => serializeSignature(signHash(native, key, hash)),
    signTransaction: signTransaction as PrivateKeyAccount["signTransaction"]
  }
}
