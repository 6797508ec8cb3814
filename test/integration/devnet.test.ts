import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Hex,
  type PublicClient,
  concat,
  createPublicClient,
  createWalletClient,
  http,
  domainSeparator,
  keccak256,
  numberToHex,
  parseAbi,
  parseSignature,
  toHex,
  verifyTypedData,
} from "viem";
import { mnemonicToAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileTestUsdc } from "../../layers/devnet/compile.js";
import {
  DEV_PRIVATE_KEYS,
  DEVNET_USDC_ADDRESS,
  type Devnet,
  type DevnetOptions,
  devnetChain,
  startDevnet,
} from "../../layers/devnet/anvil.js";
import { transferWithAuthorizationTypes, usdcAbi } from "../../layers/devnet/usdcAbi.js";

const TEN_THOUSAND_USDC = 10_000_000_000n;
const TEN_CENTS = 100_000n;
/** secp256k1 group order */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** Dev private key i (throws instead of returning undefined under noUncheckedIndexedAccess). */
const devKey = (i: number): Hex => {
  const key = DEV_PRIVATE_KEYS[i];
  if (key === undefined) throw new Error(`no dev key ${i}`);
  return key;
};
const devAddress = (i: number): Hex => privateKeyToAccount(devKey(i)).address;

/** Same compile cache as test/support/globalSetup.ts. */
const compileCacheDir = fileURLToPath(new URL("../../node_modules/.cache/test-usdc", import.meta.url));

const devnets: Devnet[] = [];

afterAll(async () => {
  await Promise.all(devnets.map((d) => d.stop()));
});

const start = async (options: Omit<DevnetOptions, "compileCacheDir"> = {}): Promise<Devnet> => {
  const devnet = await startDevnet({ ...options, compileCacheDir });
  devnets.push(devnet);
  return devnet;
};

const clientsFor = (devnet: Devnet, privateKey: Hex) => {
  const chain = devnetChain(devnet.rpcUrl);
  const transport = http(devnet.rpcUrl);
  const account = privateKeyToAccount(privateKey);
  return {
    account,
    publicClient: createPublicClient({ chain, transport, pollingInterval: 20 }),
    walletClient: createWalletClient({ account, chain, transport, pollingInterval: 20 }),
  };
};

const balanceOf = (publicClient: PublicClient, token: Hex, account: Hex): Promise<bigint> =>
  publicClient.readContract({ address: token, abi: usdcAbi, functionName: "balanceOf", args: [account] });

describe("DEV_PRIVATE_KEYS", () => {
  it("are the first 10 keys of the test mnemonic", () => {
    expect(DEV_PRIVATE_KEYS).toHaveLength(10);
    DEV_PRIVATE_KEYS.forEach((key, addressIndex) => {
      const derived = mnemonicToAccount("test test test test test test test test test test test junk", {
        addressIndex,
      });
      const hdKey = derived.getHdKey().privateKey;
      expect(hdKey).not.toBeNull();
      expect(hdKey === null ? null : toHex(hdKey)).toBe(key);
      expect(privateKeyToAccount(key).address).toBe(derived.address);
    });
  });
});

describe("compileTestUsdc", () => {
  it("caches solc's output as JSON and recovers from a corrupt cache file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devnet-compile-"));
    try {
      const shared = await compileTestUsdc(compileCacheDir, { ignoreShipped: true }); // a hit after the first run: no solc
      const first = await compileTestUsdc(dir, { ignoreShipped: true });
      expect(first).toEqual(shared);
      expect(first.bytecode).toMatch(/^0x[0-9a-f]+$/);
      expect(first.abi.some((item) => item.type === "function" && item.name === "transferWithAuthorization")).toBe(true);
      const files = await readdir(dir);
      expect(files).toHaveLength(1);
      const file = join(dir, files[0] ?? "");
      expect(JSON.parse(await readFile(file, "utf8"))).toEqual(first);
      expect(await compileTestUsdc(dir, { ignoreShipped: true })).toEqual(first);
      await writeFile(file, "{ corrupt");
      expect(await compileTestUsdc(dir, { ignoreShipped: true })).toEqual(first);
      // While the shipped contract matches the source, a start takes it: no solc, no cache file.
      expect(await compileTestUsdc(join(dir, "unused"))).toEqual(first);
      expect(await readdir(dir)).toHaveLength(1);
      expect(JSON.parse(await readFile(file, "utf8"))).toEqual(first);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("devnet", () => {
  let devnet: Devnet;
  let publicClient: PublicClient;

  beforeAll(async () => {
    devnet = await start();
    publicClient = clientsFor(devnet, devKey(0)).publicClient;
  });

  const acct = (i: number) => {
    const a = devnet.accounts[i];
    if (a === undefined) throw new Error(`no account ${i}`);
    return a;
  };

  /** Sign an EIP-3009 TransferWithAuthorization with viem, as an x402 client does. */
  const signAuthorization = async (
    fromIndex: number,
    message: { to: Hex; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex },
  ) => {
    const from = privateKeyToAccount(acct(fromIndex).privateKey);
    const domain = {
      name: "USDC",
      version: "2",
      chainId: 84532,
      verifyingContract: devnet.usdcAddress,
    } as const;
    const fullMessage = { from: from.address, ...message };
    const signature = await from.signTypedData({
      domain,
      types: transferWithAuthorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: fullMessage,
    });
    return { domain, message: fullMessage, signature };
  };

  const now = () => BigInt(Math.floor(Date.now() / 1000));
  let nonceCounter = 0;
  const freshNonce = (): Hex => keccak256(toHex(`devnet-test-${process.pid}-${nonceCounter++}-${Date.now()}`));

  it("runs anvil with chain id 84532 and the 10 dev accounts", async () => {
    expect(devnet.chainId).toBe(84532);
    expect(await publicClient.getChainId()).toBe(84532);
    expect(devnet.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const rpcAccounts = await createWalletClient({ transport: http(devnet.rpcUrl) }).getAddresses();
    expect(rpcAccounts.map((a) => a.toLowerCase())).toEqual(devnet.accounts.map((a) => a.address.toLowerCase()));
    expect(devnet.accounts.map((a) => a.privateKey)).toEqual(DEV_PRIVATE_KEYS);
  });

  it("deploys TestUSDC at the deterministic address with USDC's metadata and EIP-712 domain", async () => {
    expect(devnet.usdcAddress).toBe(DEVNET_USDC_ADDRESS);
    expect(devnet.usdcAddress).toBe("0x5FbDB2315678afecb367f032d93F642f64180aa3");
    const token = { address: devnet.usdcAddress, abi: usdcAbi } as const;
    expect(await publicClient.readContract({ ...token, functionName: "name" })).toBe("USDC");
    expect(await publicClient.readContract({ ...token, functionName: "symbol" })).toBe("USDC");
    expect(await publicClient.readContract({ ...token, functionName: "version" })).toBe("2");
    expect(await publicClient.readContract({ ...token, functionName: "decimals" })).toBe(6);
    expect(await publicClient.readContract({ ...token, functionName: "DOMAIN_SEPARATOR" })).toBe(
      domainSeparator({
        domain: { name: "USDC", version: "2", chainId: 84532, verifyingContract: devnet.usdcAddress },
      }),
    );
  });

  it("uses Circle's EIP-3009 typehashes", async () => {
    const typehashAbi = parseAbi([
      "function TRANSFER_WITH_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
      "function RECEIVE_WITH_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
      "function CANCEL_AUTHORIZATION_TYPEHASH() view returns (bytes32)",
    ]);
    const read = (
      functionName:
        | "TRANSFER_WITH_AUTHORIZATION_TYPEHASH"
        | "RECEIVE_WITH_AUTHORIZATION_TYPEHASH"
        | "CANCEL_AUTHORIZATION_TYPEHASH",
    ) => publicClient.readContract({ address: devnet.usdcAddress, abi: typehashAbi, functionName });
    // constants from Circle's FiatTokenV2 / EIP3009.sol
    expect(await read("TRANSFER_WITH_AUTHORIZATION_TYPEHASH")).toBe(
      "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267",
    );
    expect(await read("RECEIVE_WITH_AUTHORIZATION_TYPEHASH")).toBe(
      "0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8",
    );
    expect(await read("CANCEL_AUTHORIZATION_TYPEHASH")).toBe(
      "0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429",
    );
  });

  it("gives accounts 1..9 10,000 USDC each and the treasury (account 0) none", async () => {
    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(0).address)).toBe(0n);
    for (let i = 1; i <= 9; i++) {
      expect(await balanceOf(publicClient, devnet.usdcAddress, acct(i).address)).toBe(TEN_THOUSAND_USDC);
    }
    expect(
      await publicClient.readContract({ address: devnet.usdcAddress, abi: usdcAbi, functionName: "totalSupply" }),
    ).toBe(9n * TEN_THOUSAND_USDC);
  });

  it("only the owner can mint", async () => {
    const { walletClient } = clientsFor(devnet, acct(1).privateKey);
    await expect(
      walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "mint",
        args: [acct(1).address, 1n],
      }),
    ).rejects.toThrow(/FiatToken: caller is not a minter/);
  });

  it("settles an EIP-3009 authorization with the (v, r, s) overload, and rejects a replay", async () => {
    const { walletClient } = clientsFor(devnet, acct(0).privateKey);
    const { domain, message, signature } = await signAuthorization(1, {
      to: acct(0).address,
      value: TEN_CENTS,
      validAfter: now() - 600n,
      validBefore: now() + 60n,
      nonce: freshNonce(),
    });
    expect(
      await verifyTypedData({
        address: acct(1).address,
        domain,
        types: transferWithAuthorizationTypes,
        primaryType: "TransferWithAuthorization",
        message,
        signature,
      }),
    ).toBe(true);

    const before0 = await balanceOf(publicClient, devnet.usdcAddress, acct(0).address);
    const before1 = await balanceOf(publicClient, devnet.usdcAddress, acct(1).address);
    expect(
      await publicClient.readContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [message.from, message.nonce],
      }),
    ).toBe(false);

    const { r, s, yParity } = parseSignature(signature);
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      27 + yParity,
      r,
      s,
    ] as const;
    const hash = await walletClient.writeContract({
      address: devnet.usdcAddress,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe("success");

    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(0).address)).toBe(before0 + TEN_CENTS);
    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(1).address)).toBe(before1 - TEN_CENTS);
    expect(
      await publicClient.readContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [message.from, message.nonce],
      }),
    ).toBe(true);
    const used = await publicClient.getContractEvents({
      address: devnet.usdcAddress,
      abi: usdcAbi,
      eventName: "AuthorizationUsed",
      blockHash: receipt.blockHash,
    });
    expect(used.map((e) => e.args)).toEqual([{ authorizer: message.from, nonce: message.nonce }]);

    // replay: same authorization, either overload
    await expect(
      walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args,
      }),
    ).rejects.toThrow(/FiatTokenV2: authorization is used or canceled/);
    await expect(
      walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args: [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, signature],
      }),
    ).rejects.toThrow(/FiatTokenV2: authorization is used or canceled/);
  });

  it("settles an EIP-3009 authorization with the bytes-signature overload", async () => {
    const { walletClient } = clientsFor(devnet, acct(0).privateKey);
    const { message, signature } = await signAuthorization(2, {
      to: acct(0).address,
      value: TEN_CENTS,
      validAfter: 0n,
      validBefore: now() + 60n,
      nonce: freshNonce(),
    });
    const before0 = await balanceOf(publicClient, devnet.usdcAddress, acct(0).address);
    const before2 = await balanceOf(publicClient, devnet.usdcAddress, acct(2).address);
    const args = [
      message.from,
      message.to,
      message.value,
      message.validAfter,
      message.validBefore,
      message.nonce,
      signature,
    ] as const;
    const hash = await walletClient.writeContract({
      address: devnet.usdcAddress,
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args,
    });
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(0).address)).toBe(before0 + TEN_CENTS);
    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(2).address)).toBe(before2 - TEN_CENTS);
    expect(
      await publicClient.readContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [message.from, message.nonce],
      }),
    ).toBe(true);
    await expect(
      walletClient.writeContract({ address: devnet.usdcAddress, abi: usdcAbi, functionName: "transferWithAuthorization", args }),
    ).rejects.toThrow(/FiatTokenV2: authorization is used or canceled/);
  });

  it("rejects a tampered value, a malleable (high-s) signature and a wrong-length signature", async () => {
    const { walletClient } = clientsFor(devnet, acct(0).privateKey);
    const { message, signature } = await signAuthorization(3, {
      to: acct(0).address,
      value: TEN_CENTS,
      validAfter: 0n,
      validBefore: now() + 60n,
      nonce: freshNonce(),
    });
    const send = (value: bigint, sig: Hex) =>
      walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args: [message.from, message.to, value, message.validAfter, message.validBefore, message.nonce, sig],
      });
    await expect(send(TEN_CENTS * 10n, signature)).rejects.toThrow(/FiatTokenV2: invalid signature/);

    // (r, n - s, flipped v) recovers the same signer: must be refused as malleable
    const { r, s, yParity } = parseSignature(signature);
    const highS = numberToHex(SECP256K1_N - BigInt(s), { size: 32 });
    const malleable = concat([r, highS, numberToHex(27 + (1 - yParity), { size: 1 })]);
    await expect(send(TEN_CENTS, malleable)).rejects.toThrow(/FiatTokenV2: invalid signature/);
    await expect(send(TEN_CENTS, concat([r, s]))).rejects.toThrow(/FiatTokenV2: invalid signature/);

    // the untouched authorization is still usable
    const hash = await send(TEN_CENTS, signature);
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
  });

  it("rejects an expired and a not-yet-valid authorization", async () => {
    const { walletClient } = clientsFor(devnet, acct(0).privateKey);
    const submit = async (validAfter: bigint, validBefore: bigint) => {
      const { message, signature } = await signAuthorization(4, {
        to: acct(0).address,
        value: TEN_CENTS,
        validAfter,
        validBefore,
        nonce: freshNonce(),
      });
      return walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "transferWithAuthorization",
        args: [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, signature],
      });
    };
    await expect(submit(0n, now() - 1n)).rejects.toThrow(/FiatTokenV2: authorization is expired/);
    await expect(submit(now() + 3600n, now() + 7200n)).rejects.toThrow(
      /FiatTokenV2: authorization is not yet valid/,
    );
  });

  it("refuses a fixed port that is already taken instead of talking to whoever holds it (strictPort)", async () => {
    const port = Number(new URL(devnet.rpcUrl).port);
    await expect(start({ port, strictPort: true })).rejects.toThrow(/anvil exited during startup[\s\S]*Address already in use/);
    expect(await publicClient.getChainId()).toBe(84532); // the existing devnet is unharmed
  });

  it("moves to a free port when the fixed one is taken, and says so", async () => {
    const port = Number(new URL(devnet.rpcUrl).port);
    const told: Array<[number, string]> = [];
    const other = await start({ port, onPortTaken: (requested, rpcUrl) => told.push([requested, rpcUrl]) });
    expect(other.rpcUrl).not.toBe(devnet.rpcUrl);
    expect(told).toEqual([[port, other.rpcUrl]]);
    await other.stop();
    expect(await publicClient.getChainId()).toBe(84532); // the existing devnet is unharmed
  });

  it("rejects a transfer above the balance", async () => {
    const { walletClient } = clientsFor(devnet, acct(0).privateKey);
    await expect(
      walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "transfer",
        args: [acct(1).address, 10n ** 18n],
      }),
    ).rejects.toThrow(/ERC20: transfer amount exceeds balance/);
  });

  it("cancelAuthorization burns a nonce; receiveWithAuthorization only pays the caller", async () => {
    const from = privateKeyToAccount(acct(5).privateKey);
    const domain = { name: "USDC", version: "2", chainId: 84532, verifyingContract: devnet.usdcAddress } as const;
    const nonce = freshNonce();
    const cancelSig = await from.signTypedData({
      domain,
      types: { CancelAuthorization: [{ name: "authorizer", type: "address" }, { name: "nonce", type: "bytes32" }] },
      primaryType: "CancelAuthorization",
      message: { authorizer: from.address, nonce },
    });
    const anyone = clientsFor(devnet, acct(6).privateKey);
    const hash = await anyone.walletClient.writeContract({
      address: devnet.usdcAddress,
      abi: usdcAbi,
      functionName: "cancelAuthorization",
      args: [from.address, nonce, cancelSig],
    });
    expect((await publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(
      await publicClient.readContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "authorizationState",
        args: [from.address, nonce],
      }),
    ).toBe(true);

    const receive = {
      from: from.address,
      to: acct(7).address,
      value: TEN_CENTS,
      validAfter: 0n,
      validBefore: now() + 60n,
      nonce: freshNonce(),
    };
    const receiveSig = await from.signTypedData({
      domain,
      types: {
        ReceiveWithAuthorization: transferWithAuthorizationTypes.TransferWithAuthorization,
      },
      primaryType: "ReceiveWithAuthorization",
      message: receive,
    });
    const receiveArgs = [
      receive.from,
      receive.to,
      receive.value,
      receive.validAfter,
      receive.validBefore,
      receive.nonce,
      receiveSig,
    ] as const;
    await expect(
      anyone.walletClient.writeContract({
        address: devnet.usdcAddress,
        abi: usdcAbi,
        functionName: "receiveWithAuthorization",
        args: receiveArgs,
      }),
    ).rejects.toThrow(/FiatTokenV2: caller must be the payee/);
    const payee = clientsFor(devnet, acct(7).privateKey);
    const before7 = await balanceOf(publicClient, devnet.usdcAddress, acct(7).address);
    const h2 = await payee.walletClient.writeContract({
      address: devnet.usdcAddress,
      abi: usdcAbi,
      functionName: "receiveWithAuthorization",
      args: receiveArgs,
    });
    expect((await publicClient.waitForTransactionReceipt({ hash: h2 })).status).toBe("success");
    expect(await balanceOf(publicClient, devnet.usdcAddress, acct(7).address)).toBe(before7 + TEN_CENTS);
  });
});

describe("devnet with a state file", () => {
  it("keeps the token and balances across a restart without redeploying", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devnet-state-"));
    try {
      const stateFile = join(dir, "nested", "anvil-state.json");
      const first = await start({ stateFile });
      const c1 = clientsFor(first, devKey(2));
      const from = c1.account.address;
      const to = devAddress(3);
      const amount = 1_500_000n;
      const hash = await c1.walletClient.writeContract({
        address: first.usdcAddress,
        abi: usdcAbi,
        functionName: "transfer",
        args: [to, amount],
      });
      expect((await c1.publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
      const blockBefore = await c1.publicClient.getBlockNumber();
      const treasuryNonceBefore = await c1.publicClient.getTransactionCount({ address: devAddress(0) });
      expect(treasuryNonceBefore).toBe(10); // deploy + 9 mints
      await first.stop();
      await first.stop(); // idempotent

      const second = await start({ stateFile });
      expect(second.rpcUrl).not.toBe(first.rpcUrl);
      expect(second.usdcAddress).toBe(first.usdcAddress);
      const c2 = clientsFor(second, devKey(2));
      // no deployment or mint happened on restart: the deployer's nonce and the supply are unchanged. (The
      // restored head is not compared exactly: anvil may restore the block it was mining when it dumped.)
      expect(await c2.publicClient.getBlockNumber()).toBeGreaterThanOrEqual(blockBefore);
      expect(await c2.publicClient.getTransactionCount({ address: devAddress(0) })).toBe(
        treasuryNonceBefore,
      );
      expect(await balanceOf(c2.publicClient, second.usdcAddress, from)).toBe(TEN_THOUSAND_USDC - amount);
      expect(await balanceOf(c2.publicClient, second.usdcAddress, to)).toBe(TEN_THOUSAND_USDC + amount);
      expect(
        await c2.publicClient.readContract({ address: second.usdcAddress, abi: usdcAbi, functionName: "totalSupply" }),
      ).toBe(9n * TEN_THOUSAND_USDC);
      await second.stop();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("reports anvil's stderr when the state file is unreadable", async () => {
    const dir = await mkdtemp(join(tmpdir(), "devnet-bad-state-"));
    try {
      const stateFile = join(dir, "state.json");
      await writeFile(stateFile, "not json");
      await expect(start({ stateFile })).rejects.toThrow(/anvil exited during startup[\s\S]*state/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
