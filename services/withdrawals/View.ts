// Withdrawals on the wire (spec section 2): amounts as 6-decimal strings, snake_case fields, ISO times.
import { formatUsdc } from "../../src/domain/Money.js"
import type { WithdrawalRow } from "./Repo.js"

export const toWithdrawal = (w: WithdrawalRow) => ({
  id: w.id,
  agent_id: w.agentId,
  amount: formatUsdc(w.amount),
  fee: formatUsdc(w.fee),
  net_amount: formatUsdc(w.netAmount),
  destination_wallet: w.destinationWallet,
  status: w.status,
  tx_hash: w.txHash,
  created_at: w.createdAt.toISOString(),
  completed_at: w.completedAt === null ? null : w.completedAt.toISOString()
})

export const toAccepted = (w: WithdrawalRow) => ({
  withdrawalId: w.id,
  agentId: w.agentId,
  amount: formatUsdc(w.amount),
  fee: formatUsdc(w.fee),
  netAmount: formatUsdc(w.netAmount),
  destinationWallet: w.destinationWallet,
  status: "pending" as const,
  message: "Withdrawal accepted; it is processing and completes within 6 hours (usually within seconds)."
})

export const toList = (rows: ReadonlyArray<WithdrawalRow>, summary: { readonly totalCount: number; readonly totalWithdrawn: bigint; readonly pendingAmount: bigint }) => ({
  withdrawals: rows.map(toWithdrawal),
  summary: { totalCount: summary.totalCount, totalWithdrawn: formatUsdc(summary.totalWithdrawn), pendingAmount: formatUsdc(summary.pendingAmount) }
})
