// X-PAYMENT headers for the benchmark: x402 v1 "exact" EVM payloads signed by hand (EIP-712 TransferWithAuthorization),
// built before a timed phase.
import { randomBytes } from "node:crypto"
import { getAddress, type Hex } from "viem"
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { DEV_PRIVATE_KEYS, DEVNET_CHAIN_ID, DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { transferWithAuthorizationTypes } from "../../layers/devnet/usdcAbi.js"

export interface SignRequest {
  /** Dev account index of the payer (1..9). */
  readonly payer: number
  /** Dev account index of the recipient (0 = treasury). */
  readonly to: number
  /** Atomic units (6 decimals). */
  readonly value: string
  readonly validAfter: string
  readonly validBefore: string
}

export interface SignedPayment {
  /** base64 JSON, ready for the X-PAYMENT header. */
  readonly header: string
  readonly from: `0x${string}`
  readonly to: `0x${string}`
  readonly value: bigint
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly nonce: Hex
  readonly signature: Hex
}

const devKey = (i: number): Hex => {
  const key = DEV_PRIVATE_KEYS[i]
  if (key === undefined) throw new Error(`no dev key ${i}`)
  return key
}

const accounts = new Map<number, ReturnType<typeof privateKeyToAccount>>()
export const accountAt = (i: number) => {
  let account = accounts.get(i)
  if (account === undefined) {
    account = privateKeyToAccount(devKey(i))
    accounts.set(i, account)
  }
  return account
}

/** Signs one authorization by `account` to `to` for the token at `verifyingContract` (≈ 1-2 ms of CPU). */
export const signAuthorization = async (
  account: PrivateKeyAccount,
  r: { readonly to: `0x${string}`; readonly value: bigint; readonly validAfter: bigint; readonly validBefore: bigint; readonly verifyingContract: `0x${string}` }
): Promise<SignedPayment> => {
  const authorization = {
    from: account.address,
    to: r.to,
    value: r.value,
    validAfter: r.validAfter,
    validBefore: r.validBefore,
    nonce: `0x${randomBytes(32).toString("hex")}` as Hex
  }
  const signature = await account.signTypedData({
    domain: { name: "USDC", version: "2", chainId: DEVNET_CHAIN_ID, verifyingContract: getAddress(r.verifyingContract) },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: authorization
  })
  const payload = {
    x402Version: 1,
    scheme: "exact",
    network: "base-sepolia",
    payload: {
      signature,
      authorization: {
        ...authorization,
        value: authorization.value.toString(),
        validAfter: authorization.validAfter.toString(),
        validBefore: authorization.validBefore.toString()
      }
    }
  }
  return { header: Buffer.from(JSON.stringify(payload)).toString("base64"), ...authorization, signature }
}

/** Signs one authorization of a dev account to a dev account, for the devnet's token, in this thread. */
export const signOne = (r: SignRequest): Promise<SignedPayment> =>
  signAuthorization(accountAt(r.payer), {
    to: accountAt(r.to).address,
    value: BigInt(r.value),
    validAfter: BigInt(r.validAfter),
    validBefore: BigInt(r.validBefore),
    verifyingContract: DEVNET_USDC_ADDRESS
  })

/** Requests for `count` payments of `value`, round-robin over payers 1..9, valid from 10 min ago to 1 h from now. */
export const paymentRequests = (count: number, value: bigint, options: { readonly payers?: ReadonlyArray<number> } = {}): Array<SignRequest> => {
  const payers = options.payers ?? [1, 2, 3, 4, 5, 6, 7, 8, 9]
  const now = Math.floor(Date.now() / 1000)
  return Array.from({ length: count }, (_, i) => ({
    payer: payers[i % payers.length] ?? 1,
    to: 0,
    value: value.toString(),
    validAfter: String(now - 600),
    validBefore: String(now + 3600)
  }))
}

/** Signs all requests in this thread (≈ 0.6 ms each here; worker threads do not get the tsx loader on Node 20). */
export const signAll = async (requests: ReadonlyArray<SignRequest>): Promise<Array<SignedPayment>> => {
  const out: Array<SignedPayment> = []
  for (const r of requests) out.push(await signOne(r))
  return out
}
