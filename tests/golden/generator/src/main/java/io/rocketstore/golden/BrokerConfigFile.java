package io.rocketstore.golden;

import org.apache.rocketmq.common.ConfigManager;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;

/**
 * A broker config file (config/*.json) written through RocketMQ's own ConfigManager.persist(): the .bak /
 * .tmp protocol of the version on the classpath (MixAll.string2File in 4.9.8, move-to-.bak then write in
 * 5.x). The broker's managers live in rocketmq-broker, which is not on Maven Central for 4.9.8, so the
 * generator mirrors them: a subclass carries the same fields and public getters as the manager it stands
 * for, and encode() is what that manager's encode() is — RemotingSerializable.toJson(this, pretty) for the
 * managers that serialise themselves (ConsumerOffsetManager, SubscriptionGroupManager), or the toJson of
 * the wrapper they build ({@link #persist(String, RemotingSerializable)}: TopicConfigManager,
 * ScheduleMessageService). No public getter may be added here: fastjson would serialise it.
 */
public abstract class BrokerConfigFile extends ConfigManager {
    private final transient String path;

    protected BrokerConfigFile(String path) {
        this.path = path;
    }

    /** persist() of a manager whose encode(pretty) is {@code wrapper.toJson(pretty)}. */
    static void persist(String path, RemotingSerializable wrapper) {
        new BrokerConfigFile(path) {
            @Override
            public String encode(boolean prettyFormat) {
                return wrapper.toJson(prettyFormat);
            }
        }.persist();
    }

    @Override
    public String encode() {
        return encode(false);
    }

    @Override
    public String encode(boolean prettyFormat) {
        return RemotingSerializable.toJson(this, prettyFormat);
    }

    @Override
    public String configFilePath() {
        return path;
    }

    @Override
    public void decode(String jsonString) {
        throw new UnsupportedOperationException("writer only");
    }
}
