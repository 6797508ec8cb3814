// The `secp256k1` package's prebuilt libsecp256k1 binding (shipped in its npm tarball, loaded by node-gyp-build: nothing
// compiles at install), for the one recovery of a paid call (x402/recover.ts) and the treasury's signatures
// (nativeAccount.ts). Undefined where no binary loads, or when the caller's switch variable is "0": callers then use
// viem's pure-JS path (the same answers, only slower).
import { createRequire } from "node:module"

/** The binding's functions we call (a subset of `secp256k1/bindings`). */
export interface Secp256k1Binding {
  ecdsaSign(message: Uint8Array, privateKey: Uint8Array): { readonly signature: Uint8Array; readonly recid: number }
  ecdsaRecover(signature: Uint8Array, recid: number, message: Uint8Array, compressed: boolean): Uint8Array
}

export const loadSecp256k1Binding = (switchVariable: string): Secp256k1Binding | undefined => {
  if (process.env[switchVariable] === "0") return undefined
  try {
    // `secp256k1/bindings` throws when no binary loads (unlike the package's index, which falls back to elliptic).
    return createRequire(import.meta.url)("secp256k1/bindings") as Secp256k1Binding
  } catch {
    return undefined
  }
}
