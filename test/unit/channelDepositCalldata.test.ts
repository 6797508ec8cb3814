// The deposit we send is the one @x402/evm's facilitator sends: the same `deposit(config, amount, collector,
// collectorData)` calldata byte for byte (its ABI, its ERC-3009 collector data), for the official client's payload; and a
// dry run's revert reads as x402's reason.
import { ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from "@x402/evm"
import { describe, expect, it } from "vitest"
import { encodeFunctionData, getAddress } from "viem"
import { depositCalldata } from "../../layers/x402/batchSettlement/contract.js"
import { channelIdOf, depositNonceOf } from "../../layers/x402/batchSettlement/typedData.js"
import { simulationRefusal } from "../../services/channels/depositChain.js"
import { CHAIN_ID, configFor, depositPayload } from "../support/channelPayloads.js"
import { officialBatchSettlementAbi, officialErc3009CollectorData } from "../support/x402Official.js"

describe("the deposit calldata", () => {
  it("equals what @x402/evm's facilitator encodes for the official client's ERC-3009 deposit", async () => {
    const config = configFor("calldata")
    const payload = await depositPayload(config, 1_234_567n, 100n)
    if (!("erc3009Authorization" in payload.deposit.authorization)) throw new Error("no ERC-3009 authorization")
    const auth = payload.deposit.authorization.erc3009Authorization
    const channelId = channelIdOf(config, CHAIN_ID)
    const ours = depositCalldata(config, {
      payer: config.payer,
      amount: 1_234_567n,
      validAfter: BigInt(auth.validAfter),
      validBefore: BigInt(auth.validBefore),
      salt: auth.salt,
      nonce: depositNonceOf(channelId, auth.salt),
      signature: auth.signature
    })
    const official = encodeFunctionData({
      abi: officialBatchSettlementAbi,
      functionName: "deposit",
      args: [
        { ...config, payer: getAddress(config.payer), payerAuthorizer: getAddress(config.payerAuthorizer), receiver: getAddress(config.receiver), receiverAuthorizer: getAddress(config.receiverAuthorizer), token: getAddress(config.token) },
        1_234_567n,
        getAddress(ERC3009_DEPOSIT_COLLECTOR_ADDRESS),
        officialErc3009CollectorData(auth.validAfter, auth.validBefore, auth.salt, auth.signature)
      ]
    })
    expect(ours).toBe(official)
  })
})

describe("a dry run's revert", () => {
  it.each([
    ["execution reverted: FiatTokenV2: authorization is used or canceled", "invalid_batch_settlement_evm_deposit_simulation_failed", false],
    ["execution reverted: FiatTokenV2: authorization is expired", "invalid_batch_settlement_evm_payload_authorization_valid_before", false],
    ["execution reverted: FiatTokenV2: authorization is not yet valid", "invalid_batch_settlement_evm_payload_authorization_valid_after", true],
    ["execution reverted: ERC20: transfer amount exceeds balance", "invalid_batch_settlement_evm_insufficient_balance", false],
    ["execution reverted: FiatTokenV2: invalid signature", "invalid_batch_settlement_evm_receive_authorization_signature", false],
    ["execution reverted: InvalidConfig()", "invalid_batch_settlement_evm_deposit_simulation_failed", false],
    ["fetch failed: ECONNREFUSED", "invalid_batch_settlement_evm_rpc_read_failed", true]
  ])("%s → %s", (message, reason, retryable) => {
    expect(simulationRefusal(new Error(message))).toMatchObject({ reason, retryable })
  })
})
