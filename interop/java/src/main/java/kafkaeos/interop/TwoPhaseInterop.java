package kafkaeos.interop;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.PreparedTxnState;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KIP-939 with Kafka's Java client 4.4.0, for the interop tests.
 *
 * <pre>
 *   prepare  BOOTSTRAP TRANSACTIONAL_ID TOPIC COUNT   -> "PREPARED producerId:epoch", transaction left open
 *   complete BOOTSTRAP TRANSACTIONAL_ID STATE         -> "COMPLETED ..." or "REFUSED ..." (exit 3)
 * </pre>
 *
 * kafka-clients 4.4.0 ships the 2PC machinery (transaction.two.phase.commit.enable, the
 * TransactionManager's prepareTransaction / preparedTransactionState /
 * initializeTransactions(keepPreparedTxn)) but not yet the public KafkaProducer methods
 * (initTransactions(boolean), prepareTransaction(), completeTransaction(PreparedTxnState)) that
 * wrap them. This program calls the same TransactionManager methods those public methods call,
 * so it behaves as the reference client's 2PC API does.
 *
 * <p>On the wire 4.4.0 still sends InitProducerId v5 (v6, which carries Enable2Pc and
 * KeepPreparedTxn, is an unstable version the client does not use), so neither flag reaches the
 * broker: tests/interop/test_java_two_phase.py pins what follows from that.
 */
public final class TwoPhaseInterop {

    private TwoPhaseInterop() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        switch (args[0]) {
            case "prepare" -> {
                if (args.length != 5) {
                    usage();
                }
                prepare(args[1], args[2], args[3], Integer.parseInt(args[4]));
            }
            case "complete" -> {
                if (args.length != 4) {
                    usage();
                }
                System.exit(complete(args[1], args[2], args[3]));
            }
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: prepare BOOTSTRAP ID TOPIC COUNT | complete BOOTSTRAP ID PRODUCER_ID:EPOCH");
        System.exit(2);
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG, "true");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static Object transactionManager(KafkaProducer<?, ?> producer) throws Exception {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        return field.get(producer);
    }

    private static Object call(Object target, String name, Class<?>[] types, Object... args) throws Exception {
        Method method = target.getClass().getDeclaredMethod(name, types);
        method.setAccessible(true);
        return method.invoke(target, args);
    }

    /** Open a 2PC transaction, write COUNT records (keys "j-0".."j-(COUNT-1)"), prepare, and leave it open. */
    static void prepare(String bootstrap, String transactionalId, String topic, int count) throws Exception {
        KafkaProducer<byte[], byte[]> producer = producer(bootstrap, transactionalId);
        producer.initTransactions(); // Enable2Pc=true, KeepPreparedTxn=false (2PC config on)
        producer.beginTransaction();
        for (int i = 0; i < count; i++) {
            byte[] key = ("j-" + i).getBytes("UTF-8");
            producer.send(new ProducerRecord<>(topic, key, key));
        }
        producer.flush();
        Object manager = transactionManager(producer);
        call(manager, "prepareTransaction", new Class<?>[0]); // what KafkaProducer.prepareTransaction() does
        Object pidEpoch = call(manager, "preparedTransactionState", new Class<?>[0]);
        long producerId = (long) pidEpoch.getClass().getField("producerId").get(pidEpoch);
        short epoch = (short) pidEpoch.getClass().getField("epoch").get(pidEpoch);
        PreparedTxnState state = new PreparedTxnState(producerId + ":" + epoch);
        System.out.println("PREPARED " + state);
        System.out.flush();
        // Never close(): a prepared transaction belongs to the external transaction manager now.
        Runtime.getRuntime().halt(0);
    }

    /** completeTransaction's first step: initTransactions(keepPreparedTxn=true), then commit if the
     *  ongoing transaction matches STATE, else abort. */
    static int complete(String bootstrap, String transactionalId, String state) throws Exception {
        PreparedTxnState expected = new PreparedTxnState(state);
        KafkaProducer<byte[], byte[]> producer = producer(bootstrap, transactionalId);
        try {
            Object manager = transactionManager(producer);
            // What KafkaProducer.initTransactions(true) does: start the init, wake the sender, await.
            Object result = call(manager, "initializeTransactions", new Class<?>[] {boolean.class}, true);
            Field senderField = KafkaProducer.class.getDeclaredField("sender");
            senderField.setAccessible(true);
            Object sender = senderField.get(producer);
            call(sender, "wakeup", new Class<?>[0]);
            call(result, "await", new Class<?>[] {long.class, TimeUnit.class, String.class},
                20_000L, TimeUnit.MILLISECONDS, "InitProducerId(keepPreparedTxn=true)");
            if (!(boolean) call(manager, "isPrepared", new Class<?>[0])) {
                System.out.println("REFUSED no prepared transaction was kept");
                return 3;
            }
            Object current = call(manager, "preparedTransactionState", new Class<?>[0]);
            long producerId = (long) current.getClass().getField("producerId").get(current);
            short epoch = (short) current.getClass().getField("epoch").get(current);
            if (producerId == expected.producerId() && epoch == expected.epoch()) {
                producer.commitTransaction();
                System.out.println("COMPLETED commit " + expected);
            } else {
                producer.abortTransaction();
                System.out.println("COMPLETED abort (holds " + producerId + ":" + epoch + ")");
            }
            return 0;
        } catch (java.lang.reflect.InvocationTargetException e) {
            Throwable cause = e.getCause();
            System.out.println("REFUSED " + cause.getClass().getName() + ": " + cause.getMessage());
            return 3;
        } catch (RuntimeException e) {
            System.out.println("REFUSED " + e.getClass().getName() + ": " + e.getMessage());
            return 3;
        } finally {
            // close(0): do not wait for anything; an unfinished init leaves the coordinator untouched.
            producer.close(java.time.Duration.ZERO);
        }
    }
}
