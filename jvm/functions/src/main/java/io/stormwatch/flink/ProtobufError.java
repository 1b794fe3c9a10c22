package io.stormwatch.flink;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import org.apache.flink.table.functions.ScalarFunction;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;

/**
 * PROTOBUF_ERROR(payload, 'message.Class'): why a Kafka message is not that protobuf message, or NULL
 * when it is one. Flink's protobuf format can only skip an undecodable message (or fail the job); the
 * raw reader of an otlp_proto topic calls this so that each such message reaches the dead letters
 * with its reason instead. It runs once per message, not per span.
 */
public class ProtobufError extends ScalarFunction {
    private final Map<String, Method> parsers = new HashMap<>();

    public String eval(byte[] payload, String messageClass) throws ReflectiveOperationException {
        if (payload == null || payload.length == 0) {
            return "empty message";
        }
        Method parseFrom = parsers.get(messageClass);
        if (parseFrom == null) {
            Class<?> type = Class.forName(messageClass, true, Thread.currentThread().getContextClassLoader());
            parseFrom = type.getMethod("parseFrom", byte[].class);
            parsers.put(messageClass, parseFrom);
        }
        String name = messageClass.substring(messageClass.lastIndexOf('.') + 1);
        try {
            Message message = (Message) parseFrom.invoke(null, (Object) payload);
            if (message.getAllFields().isEmpty()) {
                // Bytes that decode as unknown fields only: protobuf of something else, or text.
                return "no field of an OTLP " + name + " (is the exporter writing otlp_json to a topic read as otlp_proto?)";
            }
            return null;
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof InvalidProtocolBufferException) {
                return "not an OTLP " + name + " in protobuf (is the exporter writing otlp_json to a topic read as "
                        + "otlp_proto?): " + e.getCause().getMessage();
            }
            throw e;
        }
    }
}
