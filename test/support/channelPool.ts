// The test run's devnet is shared by every test file, and x402BatchSettlement pools what is claimed per receiver: earlier
// files' claims for the same treasury would ride on a file's settle into the treasury without being its database's.
// A file that settles calls this before its service starts (settle is open to anyone), so what it books is its own.
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { getAddress } from "viem"
import { inject } from "vitest"
import { devAccount, publicClient, TREASURY, walletFor } from "./clients.js"
import { officialBatchSettlementAbi } from "./x402Official.js"

export const settleSharedPool = async () => {
  const hash = await walletFor(devAccount(7)).writeContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: officialBatchSettlementAbi,
    functionName: "settle",
    args: [TREASURY, getAddress(inject("usdcAddress"))]
  })
  await publicClient().waitForTransactionReceipt({ hash })
}
