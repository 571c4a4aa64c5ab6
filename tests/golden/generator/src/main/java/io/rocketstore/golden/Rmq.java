package io.rocketstore.golden;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.DispatchRequest;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * The only place that knows which RocketMQ line (4.x or 5.x) is on the classpath.
 *
 * The generator compiles against whichever rocketmq-store version Maven resolved; the few APIs that
 * differ between 4.9.8 and 5.x (the store constructor, the package of MessageExtBrokerInner, the arity
 * of CommitLog.checkMessageAndReturnSize, a checked exception on getMaxOffsetInQueue) are reached by
 * reflection here, so every other class is version-neutral.
 */
final class Rmq {
    /** true when the 5.x store is on the classpath (MessageExtBrokerInner moved to common in 5.0). */
    static final boolean V5 = classExists("org.apache.rocketmq.common.message.MessageExtBrokerInner");

    private static final Class<?> INNER = load(V5
        ? "org.apache.rocketmq.common.message.MessageExtBrokerInner"
        : "org.apache.rocketmq.store.MessageExtBrokerInner");

    /** Config classes that moved from rocketmq-common (4.x) to rocketmq-remoting (5.x). */
    static final String DATA_VERSION = V5
        ? "org.apache.rocketmq.remoting.protocol.DataVersion"
        : "org.apache.rocketmq.common.DataVersion";
    static final String TOPIC_CONFIG_WRAPPER = V5
        ? "org.apache.rocketmq.remoting.protocol.body.TopicConfigSerializeWrapper"
        : "org.apache.rocketmq.common.protocol.body.TopicConfigSerializeWrapper";
    static final String SUBSCRIPTION_GROUP_CONFIG = V5
        ? "org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig"
        : "org.apache.rocketmq.common.subscription.SubscriptionGroupConfig";

    private Rmq() {
    }

    static String version() {
        return org.apache.rocketmq.common.MQVersion.getVersionDesc(org.apache.rocketmq.common.MQVersion.CURRENT_VERSION);
    }

    /** A DefaultMessageStore on {@code cfg}; not loaded, not started. */
    static DefaultMessageStore newStore(MessageStoreConfig cfg) throws Exception {
        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setLongPollingEnable(false);   // no MessageArrivingListener needed
        BrokerStatsManager stats = new BrokerStatsManager("golden", false);
        for (Constructor<?> c : DefaultMessageStore.class.getConstructors()) {
            Class<?>[] p = c.getParameterTypes();
            if (!V5 && p.length == 4) {
                return (DefaultMessageStore) c.newInstance(cfg, stats, null, brokerConfig);
            }
            if (V5 && p.length == 5 && p[4].isAssignableFrom(ConcurrentHashMap.class)) {
                return (DefaultMessageStore) c.newInstance(cfg, stats, null, brokerConfig, new ConcurrentHashMap<>());
            }
        }
        throw new IllegalStateException("no known DefaultMessageStore constructor in RocketMQ " + version());
    }

    /** A fresh MessageExtBrokerInner, typed as its common superclass. */
    static MessageExt newInner() throws Exception {
        return (MessageExt) INNER.getConstructor().newInstance();
    }

    static void setPropertiesString(MessageExt inner, String s) throws Exception {
        INNER.getMethod("setPropertiesString", String.class).invoke(inner, s);
    }

    static PutMessageResult put(DefaultMessageStore store, MessageExt inner) throws Exception {
        return (PutMessageResult) call(store, DefaultMessageStore.class.getMethod("putMessage", INNER), inner);
    }

    /** CommitLog.checkMessageAndReturnSize as recovery calls it (readBody = true). */
    static DispatchRequest check(CommitLog log, ByteBuffer buf, boolean checkCRC) throws Exception {
        if (V5) {
            Method m = CommitLog.class.getMethod("checkMessageAndReturnSize", ByteBuffer.class, boolean.class,
                boolean.class, boolean.class);
            return (DispatchRequest) call(log, m, buf, checkCRC, false, true);
        }
        Method m = CommitLog.class.getMethod("checkMessageAndReturnSize", ByteBuffer.class, boolean.class, boolean.class);
        return (DispatchRequest) call(log, m, buf, checkCRC, true);
    }

    static long maxOffsetInQueue(DefaultMessageStore store, String topic, int queueId) throws Exception {
        Method m = DefaultMessageStore.class.getMethod("getMaxOffsetInQueue", String.class, int.class);
        return (Long) call(store, m, topic, queueId);
    }

    /**
     * queryMessage(topic, key, maxNum, begin, end, indexType, lastKey = null): the overload of the releases
     * that index TAGS (indexType "T" queries topic#T#key); older releases do not have it.
     */
    static org.apache.rocketmq.store.QueryMessageResult queryMessage(DefaultMessageStore store, String topic, String key,
                                                                     int maxNum, long begin, long end, String indexType) throws Exception {
        Method m;
        try {
            m = DefaultMessageStore.class.getMethod("queryMessage", String.class, String.class, int.class, long.class,
                long.class, String.class, String.class);
        } catch (NoSuchMethodException e) {
            throw new UnsupportedOperationException("RocketMQ " + version() + " has no queryMessage with an index type");
        }
        return (org.apache.rocketmq.store.QueryMessageResult) call(store, m, topic, key, maxNum, begin, end, indexType, null);
    }

    /** A new instance of a RocketMQ class through its public no-argument constructor. */
    static Object newInstance(String className) throws Exception {
        return load(className).getConstructor().newInstance();
    }

    /** Does {@code target} have a public method {@code name} taking {@code arity} arguments in this version? */
    static boolean has(Object target, String name, int arity) {
        return method(target, name, arity) != null;
    }

    /** The public method {@code name} taking {@code args.length} arguments (setters: boxed values unbox and widen). */
    static Object invoke(Object target, String name, Object... args) throws Exception {
        Method m = method(target, name, args.length);
        if (m == null) {
            throw new NoSuchMethodException(target.getClass().getName() + "." + name + " in RocketMQ " + version());
        }
        return call(target, m, args);
    }

    private static Method method(Object target, String name, int arity) {
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(name) && m.getParameterCount() == arity) {
                return m;
            }
        }
        return null;
    }

    /** Any public no-argument getter, or null when this version does not have it. */
    static Object getter(Object target, String name) throws Exception {
        try {
            return call(target, target.getClass().getMethod(name));
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static Object call(Object target, Method m, Object... args) throws Exception {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) {
                throw (Exception) cause;
            }
            throw new RuntimeException(cause);
        }
    }

    private static boolean classExists(String name) {
        try {
            Class.forName(name);
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private static Class<?> load(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(name + " not found: is rocketmq-store on the classpath?", e);
        }
    }
}
