// Whether a 65-byte ECDSA signature over an EIP-712 message is the payer's own: the one signature recovery of a paid
// call. libsecp256k1 through the `secp256k1` package's prebuilt binding (shipped in its npm tarball for linux-x64
// glibc/musl, darwin-arm64 and win32-x64, loaded by node-gyp-build: nothing compiles at install) recovers in ~0.1 ms;
// viem's pure-JS path (@noble/curves) takes ~2-2.5 ms on this machine's cores. Where the binding does not load (another
// platform, a blocked or missing package), viem's path is used: same answers, only slower.
import { loadSecp256k1Binding, type Secp256k1Binding } from "../secp256k1Binding.js"
import { bytesToHex, getAddress, type Hex, hashTypedData, hexToBytes, isAddressEqual, keccak256, stringToHex, type TypedDataDefinition, verifyTypedData } from "viem"

type Binding = Secp256k1Binding

const binding = loadSecp256k1Binding("X402_NATIVE_SECP256K1")

/** Which implementation recovers signatures in this process ("native" or "js"), for the start-up log and the tests. */
export const recoveryImplementation: "native" | "js" = binding === undefined ? "js" : "native"

/** The recovery id of a 65-byte signature's last byte, as viem reads it (0/1 or 27/28); undefined for anything else. */
const recoveryIdOf = (v: number): number | undefined => (v === 0 || v === 1 ? v : v === 27 || v === 28 ? v - 27 : undefined)

/** Recovers the signer's address with the binding; undefined when the signature recovers no key. */
const recoverNative = (native: Binding, digest: Hex, signature: Hex): `0x${string}` | undefined => {
  const bytes = hexToBytes(signature)
  const recid = recoveryIdOf(bytes[64] ?? -1)
  if (recid === undefined) return undefined
  try {
    const publicKey = native.ecdsaRecover(bytes.subarray(0, 64), recid, hexToBytes(digest), false)
    return getAddress(bytesToHex(keccak256(publicKey.subarray(1), "bytes").subarray(12)))
  } catch {
    return undefined
  }
}

const TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(stringToHex(
  "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)).slice(2)
const UINT256_LIMIT = 1n << 256n

/** A uint256 as one 32-byte ABI word (64 hex characters); undefined outside the type's range. */
const uintWord = (x: bigint) => (x < 0n || x >= UINT256_LIMIT ? undefined : x.toString(16).padStart(64, "0"))

/**
 * The EIP-712 digest of an EIP-3009 TransferWithAuthorization under a domain separator, written out: the same bytes as
 * viem's `hashTypedData` (unit-tested), two keccaks instead of its generic encoding (~0.3 ms a call on this machine).
 * Undefined for a message the type cannot hold (viem's would throw).
 */
export const transferAuthorizationDigest = (domainSeparator: Hex, message: {
  readonly from: `0x${string}`
  readonly to: `0x${string}`
  readonly value: bigint
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly nonce: Hex
}): Hex | undefined => {
  const value = uintWord(message.value)
  const validAfter = uintWord(message.validAfter)
  const validBefore = uintWord(message.validBefore)
  if (value === undefined || validAfter === undefined || validBefore === undefined) return undefined
  if (!/^0x[0-9a-fA-F]{64}$/.test(message.nonce) || !/^0x[0-9a-fA-F]{40}$/.test(message.from) || !/^0x[0-9a-fA-F]{40}$/.test(message.to)) return undefined
  if (!/^0x[0-9a-fA-F]{64}$/.test(domainSeparator)) return undefined
  const struct = keccak256(
    `0x${TRANSFER_WITH_AUTHORIZATION_TYPEHASH}${message.from.slice(2).padStart(64, "0")}${message.to.slice(2).padStart(64, "0")}${value}${validAfter}${validBefore}${message.nonce.slice(2)}`
  )
  return keccak256(`0x1901${domainSeparator.slice(2)}${struct.slice(2)}`)
}

/**
 * True when `signature` (65 bytes, 0x + 130 hex characters) over the typed data recovers to `address`; false for any
 * other signature (a smart account's, a malformed one), which the caller then takes to the chain.
 */
export const signedByKey = async <const T extends TypedDataDefinition>(
  typedData: T,
  address: `0x${string}`,
  signature: Hex,
  /** The typed data's digest when the caller computed it (transferAuthorizationDigest); else viem's hashTypedData. */
  knownDigest?: Hex
): Promise<boolean> => {
  if (signature.length !== 132) return false
  if (binding === undefined) return verifyTypedData({ ...(typedData as TypedDataDefinition), address, signature }).catch(() => false)
  let digest: Hex
  try {
    digest = knownDigest ?? hashTypedData(typedData as TypedDataDefinition)
  } catch {
    return false
  }
  const recovered = recoverNative(binding, digest, signature)
  return recovered !== undefined && isAddressEqual(recovered, address)
}
