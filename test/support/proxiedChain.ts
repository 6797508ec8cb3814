// The service on a production-like chain of the test's own (test/support/productionChain.ts) reached through the
// misbehaving RPC proxy (test/support/rpcProxy.ts), in RPC mode: the chain and the proxy as services a test reads.
import { Context, Effect, Layer } from "effect"
import { TestApp } from "./harness.js"
import { chainOn, type ProductionChain, productionChain } from "./productionChain.js"
import { type RpcProxy, rpcProxy } from "./rpcProxy.js"

export class OwnChain extends Context.Tag("test/OwnChain")<OwnChain, ProductionChain>() {}
export class Proxy extends Context.Tag("test/RpcProxy")<Proxy, RpcProxy>() {}

/** TestApp with `settings` on a chain of its own with `payers` funded payers, every chain call through the proxy. */
export const appBehindRpcProxy = (settings: Record<string, string>, payers: number) =>
  Layer.unwrapScoped(
    Effect.map(Effect.all([OwnChain, Proxy]), ([own, proxy]) => TestApp(settings, { chain: chainOn(own, "rpc", proxy.url) }))
  ).pipe(
    Layer.provideMerge(
      Layer.scoped(Proxy, Effect.flatMap(OwnChain, (own) => rpcProxy(own.rpcUrl))).pipe(Layer.provideMerge(Layer.scoped(OwnChain, productionChain({ payers }))))
    )
  )
